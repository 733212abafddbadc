"""Timing GPU work from Python with CUDA events, for the probes (probe_vocab_alignment.py, probe_torch_kernels.py)."""
import statistics

import torch


def event_ms(fn):
    """Milliseconds of one fn() between two CUDA events on the current stream, synchronized before and after."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def time_ms(fn, repeat, warmups=3):
    """Median milliseconds of fn() over `repeat` runs, after `warmups` untimed ones."""
    for _ in range(warmups):
        fn()
    return statistics.median(event_ms(fn) for _ in range(repeat))
