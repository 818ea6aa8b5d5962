"""Reading grid files: cells, labels, ranges, determinism, and one-line errors."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from cpsched.errors import GridError
from cpsched.replay.sweep import load_grid
from cpsched.replay.sweep.ranges import number_range, parse_jobs
from cpsched.runtime.policy import Policy


def test_every_trace_slice_meets_every_policy(small_trace, write_grid):
    plan = load_grid(
        write_grid(f"""
[replay]
warmup = 0.05

[[traces]]
path = "{small_trace}"
jobs = [10, "10:25", "30:"]

[[policies]]
policy = "today"

[[policies]]
policy = "easy++"
backfill_depth = {{ from = 1, to = 5, step = 2 }}
overrun = ["ladder", "doubling"]
""")
    )
    assert [t.label for t in plan.traces] == ["small[0:10]", "small[10:25]", "small[30:]"]
    assert [(t.skip_jobs, t.jobs) for t in plan.traces] == [(0, 10), (10, 15), (30, None)]
    labels = [p.label for p in plan.policies]
    varied = [f"backfill_depth={d} overrun={o}" for d in (1, 3, 5) for o in ("ladder", "doubling")]
    assert labels == ["today", *(f"easy++ {v}" for v in varied)]
    deep = plan.policies[-1].policy
    assert deep == Policy.named("easy++", backfill_depth=5, overrun="doubling")
    cells = plan.cells()
    assert len(cells) == 3 * 7
    assert len({cell.id for cell in cells}) == len(cells)
    assert {cell.warmup for cell in cells} == {0.05}


def test_today_joins_the_policies_when_no_policy_has_its_label(small_trace, write_grid):
    plan = load_grid(
        write_grid(f'[[traces]]\npath = "{small_trace}"\n[[policies]]\npolicy = "easy++"')
    )
    assert [p.label for p in plan.policies] == ["easy++", "today"]
    assert plan.policies[-1].policy == Policy.named("today")


def test_cp_policies_search_by_solver_work_unless_the_grid_says_otherwise(small_trace, write_grid):
    # As every replay's: limited by work alone unless cp_replay_search = "wall".
    plan = load_grid(
        write_grid(f"""
[[traces]]
path = "{small_trace}"
[[policies]]
name = "any"
dispatcher = ["easy", "hcp3", "pcp20"]
[[policies]]
name = "wall-clock"
cp_replay_search = "wall"
""")
    )
    deterministic = {
        p.label: p.policy.is_cp and p.policy.cp_replay_search == "work" for p in plan.policies
    }
    assert deterministic == {
        "any dispatcher=easy": False,  # a heuristic has no search to limit
        "any dispatcher=hcp3": True,
        "any dispatcher=pcp20": True,
        "wall-clock": False,
        "today": False,
    }


def test_a_cell_id_is_stable_and_changes_with_what_changes_the_replay(small_trace, write_grid):
    def ids(policy: str = "", jobs: str = "10", warmup: str = "0.01") -> list[str]:
        text = f"""
[replay]
warmup = {warmup}
[[traces]]
path = "{small_trace}"
jobs = {jobs}
[[policies]]
policy = "easy++"
{policy}
"""
        return [cell.id for cell in load_grid(write_grid(text)).cells()]

    first = ids()
    assert first == ids()
    assert first[0].startswith("small_0_10.easy++.")
    # A field of easy++: its cell changes, today's does not.
    field = ids(policy="cp_window = 7")
    assert field[0] != first[0] and field[1] == first[1]
    # The slice and the warm-up change every cell.
    for changed in (ids(jobs='"0:11"'), ids(warmup="0.02")):
        assert changed[0] != first[0] and changed[1] != first[1]


def test_paths_are_relative_to_the_grid_file_and_expand_variables(
    small_trace, write_grid, monkeypatch
):
    monkeypatch.setenv("SWEEP_TRACES", str(small_trace.parent))
    grid = write_grid(
        '[[traces]]\npath = "../small.swf"\n[[traces]]\nname = "again"\n'
        'path = "$SWEEP_TRACES/small.swf"\n[[policies]]\npolicy = "today"'
    )
    assert grid.parent.parent == small_trace.parent
    assert [t.path for t in load_grid(grid).traces] == [small_trace, small_trace]


def test_the_replay_command_names_every_setting_that_differs(small_trace, write_grid, traces_dir):
    plan = load_grid(
        write_grid(f"""
[[traces]]
path = "{small_trace}"
jobs = "5:20"
[[policies]]
name = "p20"
dispatcher = "pcp20"
cp_merge_running = false
cp_work_limit = 0.05
""")
    )
    args = shlex.split(plan.cells()[0].replay_command(small_trace.parent / "r"))
    assert args[:3] == ["cpsched", "replay", str(small_trace)]
    flags = args[5:]
    for expected in (
        ["--policy", "default"],
        ["--dispatcher", "pcp20"],
        ["--cp-work-limit", "0.05"],
        ["--no-cp-merge-running"],
        ["--skip-jobs", "5"],
        ["--jobs", "15"],
        ["--no-timings", "--no-plots"],
    ):
        at = flags.index(expected[0])
        assert flags[at : at + len(expected)] == expected


@pytest.mark.parametrize(
    ("spec", "values"),
    [
        ({"from": 1, "to": 9, "step": 4}, [1, 5, 9]),
        ({"from": 1, "to": 10, "step": 4}, [1, 5, 9]),
        ({"from": 0.1, "to": 0.5, "step": 0.1}, [0.1, 0.2, 0.3, 0.4, 0.5]),
        ({"from": 0.01, "to": 0.08, "factor": 2}, [0.01, 0.02, 0.04, 0.08]),
        ({"from": 1, "to": 100, "factor": 10}, [1, 10, 100]),
        ({"from": 3, "to": 3, "step": 1}, [3]),
    ],
)
def test_ranges_include_both_ends_and_round_away_float_noise(spec, values):
    assert number_range(spec, "here") == values


def test_job_ranges():
    assert parse_jobs(None, "here") == [(0, None)]
    assert parse_jobs(300, "here") == [(0, 300)]
    assert parse_jobs(["0:300", "300:900", "900:"], "here") == [(0, 300), (300, 600), (900, None)]


TRACE = '[[traces]]\npath = "TRACE"\n'
TODAY = '[[policies]]\npolicy = "today"\n'
VARY = TRACE + "[[policies]]\n"
BAD_GRIDS = [
    (VARY + "cp_windw = 5", "unknown policy field 'cp_windw' (did you mean 'cp_window'?)"),
    (
        VARY + 'policy = "tomorrow"',
        "policies[1]: policy = 'tomorrow' is not a named policy; choose one of today, conservative",
    ),
    (VARY + 'dispatcher = "magic"', "dispatcher = 'magic'"),
    (
        '[[traces]]\npath = "nowhere.swf"\n' + TODAY,
        "traces[1]: trace file 'nowhere.swf' does not exist",
    ),
    (TRACE + 'system = "no.toml"\n' + TODAY, "system file 'no.toml' does not exist"),
    (
        VARY + "backfill_depth = {from = 5, to = 1, step = 1}",
        "backfill_depth: range from 5 is above to 1",
    ),
    (VARY + "backfill_depth = {from = 1, to = 5, step = 0}", "range step must be > 0"),
    (VARY + "cp_limit = {from = 1, to = 5, step = 1, factor = 2}", "exactly one of step"),
    (VARY + "cp_window = {from = 1, to = 5}", "exactly one of step"),
    (VARY + "cp_window = {from = 1, to = 1e6, step = 1}", "more than 1000 values"),
    (VARY + 'cp_window = {from = "a", to = 5, step = 1}', "range from must be a number"),
    (VARY + "cp_window = {start = 1}", "unknown range key(s) 'start'"),
    (VARY + "cp_window = []", "an empty list gives no value"),
    (TRACE + 'jobs = "300:100"\n' + TODAY, 'jobs = "300:100" is empty'),
    (TRACE + 'jobs = "first 10"\n' + TODAY, "jobs = 'first 10' is not a number of jobs"),
    (TRACE + TODAY + '[[policies]]\nname = "today"', "more than one policy is labelled 'today'"),
    (TRACE + TODAY + "[sweep]\nx = 1", "unknown key(s) 'sweep'; allowed: replay, traces, policies"),
    (TRACE + "[replay]\nwarmup = 1.5\n" + TODAY, "warmup must be a share in [0, 1)"),
    (TRACE, "no [[policies]]"),
    (TODAY + "[traces]\npath = 1", "no [[traces]]"),
    ("[[traces]\n", "is not valid TOML"),
]


@pytest.mark.parametrize(("text", "message"), BAD_GRIDS)
def test_a_bad_grid_is_one_error_saying_where_and_what(small_trace, write_grid, text, message):
    grid = write_grid(text.replace("TRACE", str(small_trace)))
    with pytest.raises(GridError) as error:
        load_grid(grid)
    assert message in str(error.value)
    assert str(grid) in str(error.value)
    assert "\n" not in str(error.value)


def test_a_trace_whose_header_has_no_machine_needs_a_system_file(tmp_path, write_grid):
    trace = tmp_path / "bare.swf"
    trace.write_text("1 0 -1 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n")
    with pytest.raises(GridError, match=r"traces\[1\]: bare.swf: the SWF header does not give"):
        load_grid(write_grid(f'[[traces]]\npath = "{trace}"\n[[policies]]\npolicy = "today"'))


def test_a_missing_grid_file_says_so(tmp_path):
    with pytest.raises(GridError, match=r"grid file .*nope\.toml does not exist"):
        load_grid(tmp_path / "nope.toml")


def test_a_cell_id_is_the_same_in_every_process():
    # Sets of strings (node features) print in an order that changes with the process's
    # hash seed: a rerun must still find the cells it finished.
    code = """
from pathlib import Path
from cpsched.replay.system import Node, System
from cpsched.replay.sweep.plan import Cell, GridPolicy, TraceSlice
from cpsched.runtime.policy import Policy
features = frozenset({"gpu", "fast", "ib", "a100", "nvme", "bigmem"})
system = System("x", ("cpu",), (Node("n0", (4,), features),))
trace = TraceSlice("t", Path("t.swf"), "digest", system)
print(Cell(trace, GridPolicy("p", "default", Policy())).id)
"""
    ids = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(ids) == 1, ids
