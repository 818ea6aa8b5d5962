"""``cpsched compare`` in a terminal, a file or a pipe: at most 100 columns, in words."""

from __future__ import annotations

import io

from rich.console import Console

from cpsched.cli.compare_view import print_comparison
from cpsched.replay.compare import Comparison
from cpsched.replay.compare_table import comparison_rows


def _comparison() -> Comparison:
    summaries = {
        "today": {"mean_bounded_slowdown": 124.7, "mean_wait_s": 8825, "max_wait_s": 248_239,
                  "dispatch_ms_p99": 0.135, "replay_wall_s": 0.3},
        "default": {"mean_bounded_slowdown": 72.5, "mean_wait_s": 7205, "max_wait_s": 541_094,
                    "dispatch_ms_p99": 71.1, "replay_wall_s": 29.0},
    }  # fmt: skip
    return Comparison(
        markdown="",
        verdicts=["default: mean bounded slowdown -42% (72.5 against 124.7)"],
        rows=comparison_rows(summaries),
        descriptions={"today": "EASY", "default": "HCP3 (constraint programming)"},
    )


def test_a_pipe_gets_the_whole_table_in_100_columns_not_rich_s_80():
    out = io.StringIO()
    print_comparison(_comparison(), "today", Console(file=out))  # not a terminal: 80 wide
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 100
    header = next(line for line in lines if "mean bsld" in line)
    for heading in ("mean wait", "max wait", "long-job wait", "decision p99", "replay"):
        assert heading in header
    assert any("6 d 6 h" in line for line in lines)  # 541,094 s in human units
    assert any("×2.18" in line for line in lines)  # its ratio to today, under it


def test_a_narrow_terminal_gets_its_own_width():
    out = io.StringIO()
    print_comparison(
        _comparison(), "today", Console(file=out, width=72, force_terminal=True, color_system=None)
    )
    assert max(map(len, out.getvalue().splitlines())) <= 72
