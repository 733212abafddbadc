"""zrun's collectives inside a step against raw NCCL at the same kind, size, data type and group size (a measurement
helper run on the GPU machine, beside raw_collective_bench.py). Reads zrun --json reports (measured.collectives:
each collective of the op-timed step, its time the least over the ranks) and raw_collective_bench.py outputs, and
prints, per collective, zrun's bus bandwidth against raw NCCL's, then per kind and data type the ratio of the summed
raw time over the summed zrun time (a bytes-weighted bandwidth ratio; issues 7 and 14 ask >= 0.90).
  collective_ratio.py ZRUN.json [ZRUN.json ...] --raw RAW.json [RAW.json ...]
  collective_ratio.py --sizes ZRUN.json KIND RAW_DTYPE   # the byte sizes to ask raw_collective_bench.py for"""
import json
import sys
from collections import defaultdict

# zrun's element types as raw_collective_bench.py moves them: quantized payloads as bytes.
RAW_DTYPE = {"int8": "uint8", "int4": "uint8", "fp32": "float32", "bf16": "bf16", "fp16": "bf16"}


def collectives(path):
    """The report's measured collectives of groups of 2+ ranks, each with its group's size."""
    j = json.load(open(path))
    sizes = {c["group"]: c["group_size"] for c in j["comm"]["collectives"]}
    return [dict(c, ranks=sizes.get(c["group"], 0), raw_dtype=RAW_DTYPE.get(c["dtype"], c["dtype"]))
            for c in j["measured"]["collectives"] if sizes.get(c["group"], 0) >= 2]


def main(argv):
    if argv[0] == "--sizes":
        path, kind, dtype = argv[1:4]
        print(" ".join(str(b) for b in sorted({c["bytes"] for c in collectives(path)
                                                if c["kind"] == kind and c["raw_dtype"] == dtype})))
        return 0
    split = argv.index("--raw")
    runs, raws = argv[:split], argv[split + 1:]
    raw = {}
    for f in raws:
        try:
            for r in json.load(open(f)):
                raw[(r["kind"], r.get("dtype", "bf16"), r["ranks"], r["bytes"])] = r
        except (OSError, ValueError) as e:
            print(f"collective_ratio: no raw figures from {f}: {e}")
    agg = defaultdict(lambda: [0, 0.0, 0.0, 0])  # bytes, zrun seconds, raw seconds, count
    for path in runs:
        print(f"-- {path}")
        for c in collectives(path):
            r = raw.get((c["kind"], c["raw_dtype"], c["ranks"], c["bytes"]))
            if r is None:
                print(f"{c['name']}: {c['kind']} {c['dtype']} {c['bytes']} B on {c['group']}: no raw figure")
                continue
            a = agg[(c["kind"], c["dtype"])]
            a[0] += c["bytes"]; a[1] += c["seconds"]; a[2] += r["seconds"]; a[3] += 1
            print(f"{c['name']}: {c['kind']} {c['dtype']} {c['bytes']} B on {c['group']} ({c['ranks']} ranks): "
                  f"zrun {c['bus_GBps']:.1f} GB/s bus, raw {r['bus_GBps']:.1f} -> {r['seconds'] / c['seconds']:.2f}")
    print("-- per kind and data type (summed raw time / summed zrun time; target >= 0.90)")
    for (kind, dtype), (b, zs, rs, n) in sorted(agg.items()):
        print(f"{kind} {dtype}: {n} collectives, {b / 2**20:.1f} MiB in all: zrun {zs * 1e3:.3f} ms, raw NCCL "
              f"{rs * 1e3:.3f} ms -> {rs / zs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
