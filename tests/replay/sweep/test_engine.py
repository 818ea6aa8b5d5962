"""The engine on a Dask cluster in this machine: failures reported without stopping the
sweep, reruns that skip finished cells, progress, and a scheduler that is not there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cpsched.errors import SweepError
from cpsched.replay.sweep import CellStore, load_grid

pytestmark = pytest.mark.usefixtures("dask_installed")


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local cluster of two single-threaded worker processes for the module's sweeps;
    the traces they stage land in a temporary directory of the tests."""
    from distributed import LocalCluster

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(tmp_path_factory.mktemp("workers")))
        with LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster:
            yield cluster.scheduler_address


def test_failed_cells_are_reported_and_a_rerun_runs_only_what_is_not_finished(
    two_slice_plan, tmp_path, scheduler
):
    from cpsched.replay.sweep.engine import SweepProgress, run_sweep

    plan = two_slice_plan
    out = tmp_path / "sweep"
    seen: list[SweepProgress] = []
    run = run_sweep(plan, out, scheduler=scheduler, on_progress=seen.append)
    assert (run.cells, run.skipped, run.ran, run.workers) == (6, 0, 6, 2)
    assert sorted(run.failed) == sorted(c.id for c in plan.cells()[3:])
    assert all(error.startswith("TraceError: no job of") for error in run.failed.values())
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert (seen[-1].done, seen[-1].failed, seen[-1].running) == (6, 3, 0)
    store = CellStore(out)
    finished = [c for c in plan.cells() if store.finished(c)]
    assert finished == plan.cells()[:3]
    stamps = {c.id: (store.folder(c) / "summary.json").stat().st_mtime_ns for c in finished}

    again = run_sweep(plan, out, scheduler=scheduler)
    assert (again.skipped, again.ran, len(again.failed)) == (3, 3, 3)  # failures are retried
    assert {c.id: (store.folder(c) / "summary.json").stat().st_mtime_ns for c in finished} == stamps

    (store.folder(finished[1]) / "summary.json").unlink()
    third = run_sweep(plan, out, scheduler=scheduler)
    assert (third.skipped, third.ran) == (2, 4)
    assert store.finished(finished[1])


def test_a_sweep_of_finished_cells_needs_no_cluster(small_trace, write_grid, tmp_path, scheduler):
    from cpsched.replay.sweep.engine import run_sweep

    plan = load_grid(
        write_grid(f'[[traces]]\npath = "{small_trace}"\n[[policies]]\npolicy = "today"')
    )
    out = tmp_path / "sweep"
    assert run_sweep(plan, out, scheduler=scheduler).ran == 1
    rerun = run_sweep(plan, out, scheduler="tcp://127.0.0.1:1")  # never contacted
    assert (rerun.ran, rerun.skipped, rerun.workers) == (0, 1, 0)


def test_a_scheduler_that_is_not_there_is_a_typed_error(
    small_trace, write_grid, tmp_path, monkeypatch
):
    from cpsched.replay.sweep import engine

    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 1)
    plan = load_grid(
        write_grid(f'[[traces]]\npath = "{small_trace}"\n[[policies]]\npolicy = "today"')
    )
    with pytest.raises(SweepError, match=r"cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        engine.run_sweep(plan, tmp_path / "sweep", scheduler="tcp://127.0.0.1:1")
