"""One cell as a worker runs it (without Dask): the summary ``cpsched replay`` writes, the
error of a cell that cannot run, the shipped trace, the cell's files."""

from __future__ import annotations

import json

from cpsched.replay.runner import run_replay
from cpsched.replay.sweep import CellStore, load_grid
from cpsched.replay.sweep.cell import run_cell
from cpsched.replay.sweep.shipping import STAGING, TraceBundle
from cpsched.replay.sweep.store import ERROR, RECORD, SUMMARY, TIMINGS
from tests.replay.sweep.conftest import CTC_SYSTEM


def test_a_cell_writes_the_summary_replay_writes_byte_for_byte(traces_dir, write_grid, tmp_path):
    trace = traces_dir / "CTC-SP2-1996-3.1-cln.swf.gz"
    plan = load_grid(
        write_grid(f"""
[[traces]]
path = "{trace}"
system = "{CTC_SYSTEM}"
jobs = "50:200"
[[policies]]
name = "hcp3"
cp_window = 20
deadline = 60
""")
    )
    cell = plan.cells()[0]
    outcome = run_cell(cell, TraceBundle.read(trace))
    assert outcome.ok, outcome.error
    store = CellStore(tmp_path / "sweep")
    store.save(cell, outcome)

    direct = tmp_path / "direct"
    run_replay(cell.replay_settings(trace, direct))
    folder = store.folder(cell)
    assert (folder / SUMMARY).read_bytes() == (direct / SUMMARY).read_bytes()
    timings = json.loads((folder / TIMINGS).read_text())
    assert set(timings) == set(json.loads((direct / TIMINGS).read_text()))
    record = json.loads((folder / RECORD).read_text())
    assert record["policy"] == "hcp3" and record["wall_s"] > 0
    assert "--skip-jobs 50 --jobs 150" in record["replay_command"]
    summary = json.loads((folder / SUMMARY).read_text())
    assert summary["settings"]["jobs_skipped"] == 50
    assert summary["settings"]["cp"]["limited_by"] == "work"  # as every replay's


def test_a_cell_that_cannot_run_returns_its_error(small_trace, write_grid, tmp_path):
    plan = load_grid(
        write_grid(
            f'[[traces]]\npath = "{small_trace}"\njobs = "500:600"\n'
            '[[policies]]\npolicy = "today"\n'
        )
    )
    cell = plan.cells()[0]
    outcome = run_cell(cell, TraceBundle.read(small_trace))
    assert not outcome.ok
    assert outcome.error is not None
    # The trace as the grid names it, not the worker's copy.
    assert outcome.error.startswith(f"TraceError: no job of {small_trace} can be replayed")
    assert "40 kept, all within the 500 skipped" in outcome.error
    store = CellStore(tmp_path / "sweep")
    store.save(cell, outcome)
    assert not store.finished(cell)
    stored = store.load(cell)
    assert stored is not None and stored.error == outcome.error


def test_a_failure_never_replaces_a_finished_cell_and_a_success_clears_the_error(
    small_trace, write_grid, tmp_path
):
    plan = load_grid(
        write_grid(f'[[traces]]\npath = "{small_trace}"\n[[policies]]\npolicy = "today"\n')
    )
    cell = plan.cells()[0]
    store = CellStore(tmp_path / "sweep")
    failed = run_cell(cell, TraceBundle((("small.swf", b"garbage"),), "other digest"))
    assert failed.error is not None and "another digest" in failed.error
    store.save(cell, failed)
    assert (store.folder(cell) / ERROR).exists()
    store.save(cell, run_cell(cell, TraceBundle.read(small_trace)))
    assert store.finished(cell) and not (store.folder(cell) / ERROR).exists()
    store.save(cell, failed)
    assert store.finished(cell) and not (store.folder(cell) / ERROR).exists()


def test_a_shipped_trace_lands_once_under_its_digest_with_its_sidecar(small_trace, tmp_path):
    sidecar = small_trace.with_name("small.swf.gres.csv")
    sidecar.write_text("job,units,cpu,gpu\n")
    bundle = TraceBundle.read(small_trace)
    assert [name for name, _ in bundle.files] == ["small.swf", "small.swf.gres.csv"]
    staged = bundle.stage(tmp_path / "worker")
    assert staged.name == "small.swf"
    assert staged.parent.parent == tmp_path / "worker" / STAGING
    assert staged.read_bytes() == small_trace.read_bytes()
    assert (staged.parent / sidecar.name).read_text() == "job,units,cpu,gpu\n"
    staged.write_text("damaged")  # a copy that is not the trace is written again
    assert bundle.stage(tmp_path / "worker").read_bytes() == small_trace.read_bytes()
    sidecar.write_text("job,units,cpu,gpu\n1,1,1,0\n")
    assert TraceBundle.read(small_trace).digest != bundle.digest
