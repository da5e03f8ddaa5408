#!/usr/bin/python3
"""Plot the epoch benchmark (bench/epoch.py JSON) as a PNG.

    bench/plot.py RESULTS.json [OUT.png]      (default docs/benchmarks-epoch.png)

One column per dataset and cache/dataset ratio, the full variant only (every epoch reads
its whole order; the drop90 and ranks2 variants are in the table). Top row: throughput per epoch (log
scale) with the link rate and the local-disk read of the same order (by the same job, with
the same compute time) as reference lines.
Bottom row: bytes fetched from the backend per epoch as a fraction of the dataset (fusefs:
its bytes_from_backend; peers: bytes received on the veth), with the least possible
(1 in epoch 1, then max(0, 1 - cache/dataset)) as a reference; above 1 means data was
fetched more than once in the epoch.
"""

import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1 << 20
COLORS = {"fusefs-list": "#1b7837", "fusefs-heat": "#5aae61", "fusefs-lru": "#a6dba0",
          "s3fs": "#c2a5cf", "rclone": "#762a83"}


def main():
    src = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "docs",
                                                            "benchmarks-epoch.png")
    d = json.load(open(src))
    res = d["results"]
    cfg = d["config"]
    link = d["link_bytes_per_s"] / MIB
    datasets = [x for x in cfg["datasets"] if any(r["dataset"] == x for r in res)]
    ratios = cfg["ratios"]
    modes = [m for m in cfg["modes"] if any(r["mode"] == m for r in res)]
    epochs = cfg["epochs"]
    cols = [(ds, ra) for ds in datasets for ra in ratios]
    fig, axes = plt.subplots(2, len(cols), figsize=(4.2 * len(cols), 7.5), squeeze=False)
    width = 0.8 / max(1, len(modes))
    for c, (ds, ra) in enumerate(cols):
        info = d["datasets"][ds]
        top, bot = axes[0][c], axes[1][c]
        for i, m in enumerate(modes):
            rs = {r["epoch"]: r for r in res if r["dataset"] == ds and r["ratio"] == ra
                  and r["mode"] == m and r.get("variant", "full") == "full"}
            xs = [e + (i - (len(modes) - 1) / 2) * width for e in range(1, epochs + 1)]
            top.bar(xs, [rs[e]["MiBps"] if e in rs else 0 for e in range(1, epochs + 1)],
                    width, label=m, color=COLORS.get(m))
            bot.bar(xs, [1 - rs[e]["hit_bytes"] if e in rs else 0
                         for e in range(1, epochs + 1)], width, label=m, color=COLORS.get(m))
        top.axhline(link, color="k", ls="--", lw=1, label="link rate")
        loc = d["local"].get(ds, {}).get("MiBps")
        if loc:
            top.axhline(sorted(loc)[len(loc) // 2], color="tab:blue", ls=":", lw=1.2,
                        label="local disk")
        top.set_yscale("log")
        top.set_title("%s (%d files, %.0f MiB)\ncache/dataset %.1f" % (
            ds, info["files"], info["bytes"] / MIB, ra), fontsize=10)
        top.set_xticks(range(1, epochs + 1))
        top.set_xlabel("epoch")
        best = [1.0] + [max(0.0, 1 - ra)] * (epochs - 1)
        bot.step([0.5] + [e + 0.5 for e in range(1, epochs + 1)], [best[0]] + best,
                 color="k", ls="--", lw=1, label="least possible")
        bot.set_ylim(0, max(1.1, max(1 - r["hit_bytes"] for r in res) * 1.05))
        bot.set_xticks(range(1, epochs + 1))
        bot.set_xlabel("epoch")
        if c == 0:
            top.set_ylabel("throughput, MiB/s (log)")
            bot.set_ylabel("backend bytes / dataset bytes")
    h, l = axes[0][0].get_legend_handles_labels()
    h2, l2 = axes[1][0].get_legend_handles_labels()
    h += [x for x, y in zip(h2, l2) if y == "least possible"]
    l += ["least possible (bottom)"]
    fig.legend(h, l, loc="lower center", ncol=len(l), fontsize=9, frameon=False)
    fig.suptitle("fusefs epoch benchmark: %d mbit/s tbf link to radosgw, %d readers, "
                 "%s ms of compute per sample, page cache dropped per epoch" % (
                     cfg["rate_mbit"], cfg["threads"], cfg.get("compute_ms", 0)),
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
