"""Accuracy of every predictor on the real traces (the issue's table).

    python bench/predictor_accuracy.py [--traces DIR] [--jobs N] [--only KTH,CTC]
        [--predictors a,b] [--save DIR]

Prints MAE, median absolute error and the under-estimation rate per trace and predictor,
and how long each evaluation took; the last column compares each MAE with last-two's
(list last-two before the others). A predictor may carry constructor options after
``+``: ``profile+fallback=last-two``, ``adaboost+criterion=squared_error+features=history``
(``history`` names :data:`predictor.adaboost.HISTORY_FEATURES`; numbers are numbers).
``features`` takes ``:``-separated parts, each a feature or a named set (``basic``,
``history``, ``default``): ``adaboost+features=basic:queue+min_samples_leaf=1``.
``--save DIR`` writes each trace's real run times and every predictor's predictions as
``DIR/<trace>/<predictor>.npy`` (job order of the trace), to compare them without
re-running.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from cpsched.predictor.accuracy import evaluate
from cpsched.predictor.adaboost import BASIC_FEATURES, DEFAULT_FEATURES, HISTORY_FEATURES
from cpsched.predictor.base import Predictor
from cpsched.predictor.registry import make_predictor
from cpsched.replay.runner import resolve_system
from cpsched.replay.swf import read_swf

REPO = Path(__file__).resolve().parents[1]
TRACES = {
    "KTH": ("KTH-SP2-1996-2.1-cln.swf.gz", None),
    "CTC": ("CTC-SP2-1996-3.1-cln.swf.gz", None),
    "HPC2N": ("HPC2N-2002-2.2-cln.swf.gz", None),
    "Curie": ("CEA-Curie-2011-2.1-cln.swf.gz", "curie.toml"),
    "MetaCentrum": ("METACENTRUM-2009-2.swf.gz", "metacentrum.toml"),
}


def build(spec: str) -> Predictor:
    """``name+key=value+...`` -> the predictor with those constructor options."""
    name, *pairs = spec.split("+")
    options: dict[str, object] = {}
    for pair in pairs:
        key, _, text = pair.partition("=")
        value: object = text
        if key == "features":
            sets = {
                "basic": BASIC_FEATURES,
                "default": DEFAULT_FEATURES,
                "history": HISTORY_FEATURES,
            }
            parts = [sets.get(part, (part,)) for part in text.split(":")]
            value = tuple(dict.fromkeys(f for part in parts for f in part))
        elif text.lstrip("-").replace(".", "", 1).isdigit():
            value = float(text) if "." in text else int(text)
        options[key] = value
    return make_predictor(name, **options)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=Path, default=REPO.parent / "shared/data/traces")
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--only", default=",".join(TRACES))
    parser.add_argument("--predictors", default="wall-time,last-two,profile,adaboost")
    parser.add_argument("--save", type=Path)
    args = parser.parse_args()
    print("| trace | predictor | jobs | MAE s | median AE s | under-rate | MAE / last-two | s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in args.only.split(","):
        file, system_file = TRACES[name]
        path = args.traces / file
        system = resolve_system(path, REPO / "systems" / system_file if system_file else None)
        jobs = read_swf(path, system, limit=args.jobs).jobs
        maes: dict[str, float] = {}
        saved = args.save / name if args.save else None
        if saved:
            saved.mkdir(parents=True, exist_ok=True)
            np.save(saved / "real.npy", np.array([tj.run_time for tj in jobs], dtype=np.int64))
        for predictor in args.predictors.split(","):
            began = time.perf_counter()
            result = evaluate(jobs, build(predictor))
            took = time.perf_counter() - began
            maes[predictor] = result["mae_s"]
            if saved:
                np.save(saved / f"{predictor}.npy", result["predictions"])
            base = maes.get("last-two")
            ratio = f"{result['mae_s'] / base:.3f}" if base else ""
            print(
                f"| {name} | {predictor} | {result['jobs']} | {result['mae_s']:.0f} | "
                f"{result['median_ae_s']:.0f} | {result['under_rate']:.3f} | {ratio} | "
                f"{took:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
