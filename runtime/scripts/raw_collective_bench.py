"""Raw NCCL bus bandwidth through torch.distributed (plots-only Python elsewhere; this is a measurement helper
run on the GPU machine): all_reduce / all_gather / reduce_scatter / all_to_all of the given byte sizes, timed with
CUDA events, nccl-tests' bus-bandwidth factors. The data type is bf16 unless a set names another (uint8 for
ZeRO++'s int8 / int4 payloads, float32 for qwZ's scales): a size is bytes, the element count follows from it.
all_to_all runs as torch's all_to_all_single (grouped ncclSend / ncclRecv, as zrun issues it); an all-gather's
size is its output, a reduce-scatter's and an all-to-all's their input.
One process group serves every set asked for (one start-up for all).
Usage: torchrun --nproc_per_node N raw_collective_bench.py KIND[:DTYPE]=BYTES[,BYTES...] [...] > out.json
with DTYPE bf16 (default), uint8 or float32."""
import json
import os
import sys

import torch
import torch.distributed as dist

DTYPES = {"bf16": (torch.bfloat16, 2), "uint8": (torch.uint8, 1), "float32": (torch.float32, 4)}


def sets(args):
    """(kind, dtype name, byte size) of every KIND[:DTYPE]=BYTES[,BYTES...] argument."""
    for a in args:
        what, sizes = a.split("=")
        kind, _, dtype_name = what.partition(":")
        for size in sizes.split(","):
            if size:
                yield kind, dtype_name or "bf16", int(size)


def main():
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    out = []
    for kind, dtype_name, size in sets(sys.argv[1:]):
        dtype, width = DTYPES[dtype_name]
        elems = max(size // width // n, 1) * n  # whole elements, a multiple of the ranks
        if kind == "all_reduce":
            buf = torch.ones(elems, dtype=dtype, device="cuda")
            op = lambda: dist.all_reduce(buf, op=dist.ReduceOp.AVG)  # zrun averages gradients (ncclAvg)
            factor = 2 * (n - 1) / n
        elif kind == "all_gather":  # size = output
            inp = torch.ones(elems // n, dtype=dtype, device="cuda")
            outp = torch.empty(elems, dtype=dtype, device="cuda")
            op = lambda: dist.all_gather_into_tensor(outp, inp)
            factor = (n - 1) / n
        elif kind == "all_to_all":  # size = the whole send buffer
            inp = torch.ones(elems, dtype=dtype, device="cuda")
            outp = torch.empty(elems, dtype=dtype, device="cuda")
            op = lambda: dist.all_to_all_single(outp, inp)
            factor = (n - 1) / n
        else:  # reduce_scatter, size = input
            inp = torch.ones(elems, dtype=dtype, device="cuda")
            outp = torch.empty(elems // n, dtype=dtype, device="cuda")
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
        out.append({"kind": kind, "dtype": dtype_name, "bytes": size, "ranks": n, "seconds": seconds,
                    "bus_GBps": size / seconds / 1e9 * factor})
    if rank == 0:
        print(json.dumps(out))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
