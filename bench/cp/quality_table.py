"""Markdown quality table from the replays of bench/cp/quality.sh.

python bench/cp/quality_table.py OUT_KTH OUT_CTC ...   (each holds <dispatcher>/summary.json)

Per trace and dispatcher: mean wait, mean slowdown, mean bounded slowdown (τ = 10 s), max
wait, long jobs' (trace run > 5 h) mean wait, fallbacks and dispatch latency; the bsld and
long-wait columns also as ratios to EASY on the same trace.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DISPATCHERS = ("easy", "hcp3", "pcp3", "pcp20")


def row(trace: str, name: str, s: dict, easy: dict) -> str:
    long_wait = s["by_length_class"]["long"]["mean_wait_s"]
    easy_long = easy["by_length_class"]["long"]["mean_wait_s"]
    bsld, easy_bsld = s["mean_bounded_slowdown"], easy["mean_bounded_slowdown"]
    return (
        f"| {trace} | {name} | {s['jobs']} | {s['mean_wait_s']:.0f} | {s['mean_slowdown']:.1f} "
        f"| {bsld:.1f} ({bsld / easy_bsld - 1:+.0%}) | {s['max_wait_s']} "
        f"| {long_wait:.0f} ({long_wait / easy_long - 1:+.0%}) | {s['fallbacks']} "
        f"/ {s['dispatch_calls']} | {s['dispatch_ms_p50']:.1f} / {s['dispatch_ms_p99']:.0f} "
        f"/ {s['dispatch_ms_max']:.0f} |"
    )


def main(dirs: list[str]) -> None:
    print(
        "| trace | dispatcher | jobs | mean wait s | mean sld | mean bsld (vs EASY) "
        "| max wait s | long-job mean wait s (vs EASY) | fallbacks / calls "
        "| latency ms p50 / p99 / max |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in dirs:
        out = Path(d)
        summaries = {
            n: json.loads((out / n / "summary.json").read_text())
            for n in DISPATCHERS
            if (out / n / "summary.json").exists()
        }
        if "easy" not in summaries:
            continue
        trace = summaries["easy"]["settings"]["trace"].split("-")[0]
        for name, s in summaries.items():
            print(row(trace, name, s, summaries["easy"]))


if __name__ == "__main__":
    main(sys.argv[1:])
