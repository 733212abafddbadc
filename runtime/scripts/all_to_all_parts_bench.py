"""A bucket's all-to-all as its parts, on raw NCCL through torch.distributed (a measurement helper run on the GPU
machine beside zrun; issue 14): qgZ sends each tensor's int4 data and its scales as a pair of its own in DeepSpeed;
the schedule's all-to-all moves the bucket's peer-major region as one pair (before 2026-11-28: one pair per tensor's
data and one per its scales, every pair's blocks as ncclSend / ncclRecv in one NCCL group). This times, at the
tensors' pair sizes:
  one_call:   one all_to_all_single of the pairs' summed bytes (what the peer-major region moves, less its padding);
  grouped:    every pair's blocks in one NCCL group of sends and receives, the rank's own block too (zrun before);
  grouped_self_copy: the same group without the rank's own block, which a device copy moves beforehand;
  per_call:   one all_to_all_single per pair, one after another (as DeepSpeed's all_to_all_quant_reduce calls it).
Usage: torchrun --nproc_per_node N all_to_all_parts_bench.py SCHEDULE.json OP_NAME > out.json"""
import json
import os
import sys

import torch
import torch.distributed as dist


def pair_sizes(schedule, op_name):
    """The op's (input, output) pairs' sizes; for a peer-major qgZ region (one pair, the schedule since 2026-11-28) the
    pairs DeepSpeed sends instead, each tensor's values and scales: the sizes of the outputs of the op that fills the
    region (the quantize before the intra hop, the requantizing dequant-reduce before the inter hop)."""
    ops = json.load(open(schedule))["ops"]
    op = next(o for o in ops if o["name"] == op_name)
    inputs = [u for u in op["uses"] if u["role"] == "input"]
    if len(inputs) > 1:
        return [u["bytes"] for u in inputs]
    writer = op_name.replace("all_to_all.inter", "dequant_reduce.intra").replace("all_to_all.intra", "quantize")
    w = next(o for o in ops if o["name"] == writer)
    return [u["bytes"] * u.get("blocks", 1) for u in w["uses"] if u["role"] == "output"]


def timed(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def main():
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    sizes = [s // n * n for s in pair_sizes(sys.argv[1], sys.argv[2])]
    total = sum(sizes)
    ins = [torch.ones(s, dtype=torch.uint8, device="cuda") for s in sizes]
    outs = [torch.empty(s, dtype=torch.uint8, device="cuda") for s in sizes]
    big_in = torch.ones(total, dtype=torch.uint8, device="cuda")
    big_out = torch.empty(total, dtype=torch.uint8, device="cuda")

    def p2p_ops(with_self):
        ops = []
        for i, o in zip(ins, outs):
            b = i.numel() // n
            for j in range(n):
                if j == rank and not with_self:
                    continue
                ops.append(dist.P2POp(dist.isend, i[j * b:(j + 1) * b], j))
                ops.append(dist.P2POp(dist.irecv, o[j * b:(j + 1) * b], j))
        return ops

    def grouped(with_self):
        def run():
            if not with_self:
                for i, o in zip(ins, outs):
                    b = i.numel() // n
                    o[rank * b:(rank + 1) * b].copy_(i[rank * b:(rank + 1) * b])
            for w in dist.batch_isend_irecv(p2p_ops(with_self)):
                w.wait()
        return run

    results = {"one_call": timed(lambda: dist.all_to_all_single(big_out, big_in))}
    try:
        results["grouped"] = timed(grouped(True))
    except Exception as e:  # a torch that refuses a rank's send to itself
        results["grouped_error"] = str(e)[:200]
    results["grouped_self_copy"] = timed(grouped(False))
    results["per_call"] = timed(lambda: [dist.all_to_all_single(o, i) for i, o in zip(ins, outs)])
    if rank == 0:
        factor = (n - 1) / n
        print(json.dumps({"op": sys.argv[2], "ranks": n, "pairs": len(sizes), "bytes": total,
                          "smallest_pair": min(sizes), "largest_pair": max(sizes),
                          "seconds": {k: v for k, v in results.items() if not k.endswith("error")},
                          "bus_GBps": {k: total * factor / v / 1e9 for k, v in results.items()
                                       if not k.endswith("error")},
                          **{k: v for k, v in results.items() if k.endswith("error")}}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
