"""Raw NCCL bus bandwidth through torch.distributed (plots-only Python elsewhere; this is a measurement helper
run on the GPU machine): all_reduce / all_gather / reduce_scatter of the given byte sizes in bf16, timed with
CUDA events, nccl-tests' bus-bandwidth factors. Usage: torchrun --nproc_per_node N raw_collective_bench.py
KIND BYTES [BYTES...] > out.json"""
import json
import os
import sys

import torch
import torch.distributed as dist


def main():
    kind, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    out = []
    for size in sizes:
        elems = size // 2
        if kind == "all_reduce":
            buf = torch.ones(elems, dtype=torch.bfloat16, device="cuda")
            op = lambda: dist.all_reduce(buf, op=dist.ReduceOp.AVG)  # zrun averages gradients (ncclAvg)
            factor = 2 * (n - 1) / n
        elif kind == "all_gather":  # size = output
            inp = torch.ones(elems // n, dtype=torch.bfloat16, device="cuda")
            outp = torch.empty(elems // n * n, dtype=torch.bfloat16, device="cuda")
            op = lambda: dist.all_gather_into_tensor(outp, inp)
            factor = (n - 1) / n
        else:  # reduce_scatter, size = input
            inp = torch.ones(elems // n * n, dtype=torch.bfloat16, device="cuda")
            outp = torch.empty(elems // n, dtype=torch.bfloat16, device="cuda")
            op = lambda: dist.reduce_scatter_tensor(outp, inp)
            factor = (n - 1) / n
        for _ in range(5):
            op()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        iters = 20
        start.record()
        for _ in range(iters):
            op()
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / iters
        out.append({"kind": kind, "bytes": size, "ranks": n, "seconds": seconds,
                    "bus_GBps": size / seconds / 1e9 * factor})
    if rank == 0:
        print(json.dumps(out))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
