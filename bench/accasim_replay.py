"""Replay an SWF trace with AccaSim 1.1.3 (EASY backfilling + first-fit), for comparison.

Runs in its own venv (bench/accasim_vs_cpsched.sh makes it), not in cpsched's:
python bench/accasim_replay.py TRACE.swf[.gz] [--max-lines N]
Prints one JSON line: jobs, AccaSim's mean wait over all jobs and without the first 1%.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import gzip
import json
import shutil
import time
from array import array
from pathlib import Path
from tempfile import TemporaryDirectory

# AccaSim 1.1.3 does `from collections import Mapping`, removed in Python 3.10: restore
# the alias instead of editing the installed package, so the code measured is PyPI's.
collections.Mapping = collections.abc.Mapping  # type: ignore[attr-defined]

from accasim.base.additional_data import AdditionalData  # noqa: E402
from accasim.base.allocator_class import FirstFit  # noqa: E402
from accasim.base.scheduler_class import EASYBackfilling  # noqa: E402
from accasim.base.simulator_class import Simulator  # noqa: E402
from accasim.utils.reader_class import DefaultTweaker  # noqa: E402

WARMUP_FRACTION = 0.01  # as cpsched's summary.json: first 1% by submission left out


class WaitRecorder(AdditionalData):
    """Keeps (job id, submit, wait) per finished job: AccaSim's own stats only keep the
    waits, in completion order, so the warm-up jobs could not be told apart. Typed
    arrays keep this to ~5 MB so it barely moves the peak RSS being measured."""

    def __init__(self, event_manager: object = None) -> None:
        super().__init__(event_manager)
        self.ids, self.submits, self.waits = array("q"), array("q"), array("q")

    def exec_after_completion(self, removed_jobs: list) -> None:
        for job in removed_jobs:
            self.ids.append(int(job.id))
            self.submits.append(job.queued_time)
            self.waits.append(job.waiting_time)

    # The remaining hooks are abstract in AccaSim; nothing to do in them.
    def exec_before_dispatching(self, job_dict: dict, queued_jobs: list) -> None:
        pass

    def exec_after_dispatching(self, job_dict: dict, to_dispatch: list, rejected: list) -> None:
        pass

    def exec_before_submission(self, *args: object, **kwargs: object) -> None:
        pass

    def exec_after_submission(self, *args: object, **kwargs: object) -> None:
        pass

    def exec_before_completion(self, *args: object, **kwargs: object) -> None:
        pass

    def stop(self) -> None:
        pass


class NoMemoryTweaker(DefaultTweaker):
    """AccaSim's default SWF tweak, minus memory. cpsched's header machine has no memory,
    so it ignores the log's per-processor requests; AccaSim would crash on them instead
    (it drops unknown resource types only if the first job asks for them, and HPC2N's
    first job has no memory data while 175k later ones do)."""

    def tweak_function(self, job: dict) -> dict:
        job.pop("mem", None)
        return super().tweak_function(job)


def header_machine(swf: Path) -> tuple[int, int]:
    """(nodes, cores per node) from MaxNodes/MaxProcs, as cpsched does without --system."""
    fields = {}
    with swf.open() as f:
        for line in f:
            if not line.startswith(";"):
                break
            key, _, value = line[1:].partition(":")
            fields.setdefault(key.strip(), value.strip())
    nodes, procs = int(fields["MaxNodes"]), int(fields["MaxProcs"])
    return nodes, procs // nodes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace", type=Path)
    parser.add_argument("--max-lines", type=int, help="read only the first N lines (smoke test)")
    args = parser.parse_args()

    with TemporaryDirectory(prefix="accasim-") as tmp:
        swf = Path(tmp) / args.trace.name.removesuffix(".gz")
        # AccaSim's reader opens plain text only; stream so the copy adds no memory.
        opener = gzip.open if args.trace.suffix == ".gz" else open
        with opener(args.trace, "rb") as src, swf.open("wb") as dst:
            shutil.copyfileobj(src, dst)

        # AccaSim's examples/HPC2N.config says 120 nodes x 2 cores (+ memory); the header
        # view (240 x 1) is what cpsched replays without --system. Jobs ask for 1-core
        # units, so both machines start the same jobs.
        nodes, cores = header_machine(swf)
        config = Path(tmp) / "system.config"
        config.write_text(
            json.dumps({"groups": {"g0": {"core": cores}}, "resources": {"g0": nodes}})
        )

        extra = {"max_lines": args.max_lines} if args.max_lines else {}
        sim = Simulator(
            str(swf),
            str(config),
            EASYBackfilling(FirstFit()),
            # A class, not an instance: 1.1.3 checks instances against its event manager
            # before creating it, and fails.
            additional_data=[WaitRecorder],
            RESULTS_FOLDER_PATH=tmp,
            tweak_function=NoMemoryTweaker(start_time=0),
            # Only AccaSim's closing statistics (logged): no per-job or benchmark files.
            scheduling_output=False,
            pprint_output=False,
            benchmark_output=False,
            statistics_output=False,
            show_statistics=True,
            **extra,
        )
        t0 = time.perf_counter()
        sim.start_simulation(system_status=False)
        sim_s = time.perf_counter() - t0

    recorder = sim.mapper.additional_data[0]
    waits = sim.mapper.wtimes  # the list AccaSim averages for "Avg. waiting times"
    order = sorted(range(len(recorder.ids)), key=lambda i: (recorder.submits[i], recorder.ids[i]))
    skip = int(WARMUP_FRACTION * len(order) + 1e-9)
    kept = [recorder.waits[i] for i in order[skip:]]
    print(
        json.dumps(
            {
                "jobs": len(waits),
                "loaded": sim.loaded_jobs,
                "rejected": sim.rejected_jobs,
                "mean_wait_s_all": sum(waits) / len(waits),
                "mean_wait_s_excl_warmup": sum(kept) / len(kept),
                "warmup_jobs_excluded": skip,
                "simulate_s": round(sim_s, 2),
                "machine": f"{nodes} nodes x {cores} cores",
            }
        )
    )


if __name__ == "__main__":
    main()
