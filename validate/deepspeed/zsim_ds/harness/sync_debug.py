"""Where a step makes the host wait for the GPU, inside C++ too (issue 39): torch's CUDA sync debug mode warns at every
synchronizing call (a copy to the CPU, .item(), a tensor's truth value, nonzero, a stream or device synchronisation),
wherever it is made, which the harness's SyncClock (host_cpu.py: Python-level synchronize and .item() only) cannot
see. The harness's --sync-debug-steps run steps under it:

    with SyncDebug(torch) as sd:
        ...one step...
    sd.sites()   # [{"site": "file:line function", "calls": n, "message": ...}, ...], most calls first

A site is the innermost frame of the Python stack at the warning that is not torch's or this file's (DeepSpeed's,
transformers' or the harness's line that made the call). Warnings raised on autograd's thread reach Python there
(DeepSpeed's backward hooks run Python on it) or, for C++-only code, when the backward returns. The mode slows every
call it checks, so the step's time is not a timed step's.
"""
import collections
import os
import traceback
import warnings

_HOST_CPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host_cpu.py")


def _skipped(filename):
    """torch's own frames, the warnings module's, this file's and host_cpu.py's (SyncClock wraps the sync calls, so
    its frame stands between the caller and torch)."""
    return (os.sep + "torch" + os.sep in filename or os.path.basename(filename) == "warnings.py"
            or os.path.abspath(filename) in (os.path.abspath(__file__), _HOST_CPU))


def _site(stack):
    for frame in reversed(stack):
        if not _skipped(frame.filename):
            return f"{frame.filename}:{frame.lineno} {frame.name}"
    return "(no frame outside torch)"


class SyncDebug:
    def __init__(self, torch):
        self._torch = torch
        self._counts = collections.Counter()
        self._messages = {}
        self._saved = None

    def _show(self, message, category, filename, lineno, file=None, line=None):
        site = _site(traceback.extract_stack())
        self._counts[site] += 1
        self._messages.setdefault(site, str(message).splitlines()[0][:160])

    def __enter__(self):
        self._saved = (warnings.showwarning, warnings.filters[:])
        warnings.simplefilter("always")
        warnings.showwarning = self._show
        self._torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        self._torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning, warnings.filters[:] = self._saved
        return False

    def sites(self):
        return [{"site": s, "calls": n, "message": self._messages[s]} for s, n in self._counts.most_common()]
