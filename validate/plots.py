"""Plots of zsim against zrun (plots only): predicted against measured time per op kind, the error by
collective size, and both timelines of the measured step overlaid (one row per stream, zsim above zrun). Usage: python3 validate/plots.py OPS.csv OUT_DIR (OPS.csv from `zsim validate --plots`)."""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    out = sys.argv[2]
    kinds = sorted({r["kind"] for r in rows})
    fig, ax = plt.subplots(figsize=(7, 6))
    lo, hi = 1e-7, 1e-7
    for k in kinds:
        pts = [(float(r["measured_s"]), float(r["predicted_s"])) for r in rows if r["kind"] == k and float(r["measured_s"]) > 0]
        if not pts:
            continue
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=10, label=k)
        hi = max(hi, max(max(p) for p in pts))
    ax.plot([lo, hi], [lo, hi], "k--", linewidth=0.8, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (s)")
    ax.set_ylabel("predicted by zsim (s)")
    ax.set_title("zsim against zrun, per op")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "predicted_vs_measured.png"), dpi=90)

    colls = [r for r in rows if "@" in r["kind"] and float(r["measured_s"]) > 0 and int(r["bytes"]) > 0]
    if colls:
        fig, ax = plt.subplots(figsize=(7, 4))
        for k in sorted({r["kind"] for r in colls}):
            pts = [(int(r["bytes"]), (float(r["predicted_s"]) - float(r["measured_s"])) / float(r["measured_s"]))
                   for r in colls if r["kind"] == k]
            ax.scatter([p[0] for p in pts], [100 * p[1] for p in pts], s=12, label=k)
        ax.axhline(0, color="k", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("collective size (bytes)")
        ax.set_ylabel("error (%)")
        ax.set_title("collective time error by size")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "collective_error_by_size.png"), dpi=90)

    timeline(rows, out)


def timeline(rows, out):
    """Both timelines of one step: per stream, zsim's ops (upper half of the row) above zrun's (lower half)."""
    rows = [r for r in rows if r.get("stream") and float(r["measured_s"]) > 0]
    if not rows:
        return
    streams = sorted({r["stream"] for r in rows}, key=lambda s: (s != "compute", s))
    colors = {}
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.9 * len(streams)))
    for i, st in enumerate(streams):
        for r in (r for r in rows if r["stream"] == st):
            c = colors.setdefault(r["kind"], f"C{len(colors) % 10}")
            ax.broken_barh([(1e3 * float(r["predicted_start_s"]), 1e3 * float(r["predicted_s"]))], (i + 0.05, 0.4),
                           facecolors=c, edgecolor="none")
            ax.broken_barh([(1e3 * float(r["measured_start_s"]), 1e3 * float(r["measured_s"]))], (i - 0.45, 0.4),
                           facecolors=c, edgecolor="none", alpha=0.6)
    ax.set_yticks(range(len(streams)))
    ax.set_yticklabels([f"{s}\nzsim / zrun" for s in streams], fontsize=7)
    ax.set_xlabel("time in the step (ms)")
    ax.set_title("one step: zsim (upper bar of each row) against zrun (lower, faded)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    ax.legend(handles, list(colors), fontsize=6, ncol=4, loc="upper right")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "timeline.png"), dpi=90)


if __name__ == "__main__":
    main()
