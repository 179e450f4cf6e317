#!/usr/bin/env python3
"""Draws the spawn-cost chart from the summaries scripts/bench-spawn.sh saved.

  python3 scripts/bench_chart.py --out docs/bench-spawn.png \
      --machine target/bench/spawn-machine.json \
      target/bench/spawn-true.json target/bench/spawn-python.json

One panel per group (`/bin/true`, `python3 -c pass`): the median per
sandbox, labelled with its ratio to the bare run of the same group and run.
matplotlib is installed from PyPI (user site) when it is missing.
"""

import argparse
import json
import subprocess
import sys


def load_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("installing matplotlib from PyPI", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"],
            check=True,
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


TITLES = {"true": "true (the policy-allowed spelling)", "python": "python3 -c pass"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--machine")
    ap.add_argument("summaries", nargs="+")
    a = ap.parse_args()

    groups = []
    for path in a.summaries:
        try:
            with open(path, encoding="utf-8") as f:
                groups.append(json.load(f))
        except FileNotFoundError:
            print(f"skipping missing {path}", file=sys.stderr)
    if not groups:
        sys.exit("no summaries to draw")
    machine = {}
    if a.machine:
        with open(a.machine, encoding="utf-8") as f:
            machine = json.load(f)

    plt = load_matplotlib()
    rows = sum(len(g["commands"]) for g in groups)
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 1.2 + 0.55 * rows + 0.6 * len(groups)))
    if len(groups) == 1:
        axes = [axes]
    for ax, g in zip(axes, groups):
        cmds = sorted(g["commands"], key=lambda c: c["median_ms"])
        names = [c["name"] for c in cmds]
        meds = [c["median_ms"] for c in cmds]
        colors = []
        for c in cmds:
            if c["name"] == g["baseline"]:
                colors.append("#9e9e9e")
            elif "no run" in c["name"]:
                # A breakdown row (policy and decision only), not a sandbox.
                colors.append("#a5d6a7")
            elif c["name"].startswith("agent-exec"):
                colors.append("#2e7d32")
            else:
                colors.append("#1565c0")
        bars = ax.barh(names, meds, color=colors)
        ax.invert_yaxis()
        top = max(meds) if meds else 1
        for bar, c in zip(bars, cmds):
            ax.text(
                bar.get_width() + top * 0.01,
                bar.get_y() + bar.get_height() / 2,
                f"{c['median_ms']:.2f} ms  ({c['ratio']:.1f}x bare)",
                va="center",
                fontsize=8,
            )
        ax.set_xlim(0, top * 1.35)
        ax.set_xlabel("median wall time per run, ms (lower is better)")
        ax.set_title(f"spawn cost: {TITLES.get(g['group'], g['group'])}", fontsize=10, loc="left")
        ax.tick_params(axis="y", labelsize=8)
    if machine:
        fig.suptitle(
            f"{machine.get('nproc')} x {machine.get('cpu')}, Linux {machine.get('kernel')}, {machine.get('date')}",
            fontsize=8,
        )
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
