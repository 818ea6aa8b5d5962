"""The site's priority as the queue order: FCFS, EASY and conservative follow it; the CP
dispatchers fill their window in its order."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cpsched.core import make_dispatcher, make_snapshot
from cpsched.core.cp import ModelConfig, SearchConfig
from cpsched.core.heuristics import by_site_priority
from cpsched.runtime.policy import Policy
from tests.factories import job, limits_as_durations, nodes, running


def prioritised(id: str, priority: int | None, **kw: object) -> object:
    return replace(job(id, **kw), priority=priority)  # type: ignore[arg-type]


def test_the_site_order_is_priority_then_submission():
    queue = [
        prioritised("old", 5, submit=0),
        prioritised("none", None, submit=1),
        prioritised("high", 9, submit=2),
        prioritised("tie", 5, submit=3),
    ]
    assert [j.id for j in by_site_priority(queue, {})] == ["high", "old", "tie", "none"]  # type: ignore[arg-type]


def test_fcfs_and_easy_follow_the_site_priority():
    # 4 cores, 2 busy until 100: "big" (4) is blocked; the site puts "late" (2) first.
    busy = running(job("r", limit=100, units=2), 0, [(0, 2)])
    big = prioritised("big", 1, submit=0, units=4, limit=50)
    late = prioritised("late", 9, submit=5, units=2, limit=500)
    snap = make_snapshot(10, ("cpu",), nodes(4), [busy], [big, late])
    durations = limits_as_durations(snap)
    mine = make_dispatcher("fcfs", "first-fit").decide(snap, durations)
    theirs = make_dispatcher("fcfs", "first-fit", queue_order="site").decide(snap, durations)
    assert mine.starts == () and [s.job_id for s in theirs.starts] == ["late"]
    # EASY in cpsched's order reserves for "big" at 100 and cannot backfill "late" (500 s
    # on the 2 cores big needs then); in the site's order "late" simply goes first.
    easy = make_dispatcher("easy", "first-fit").decide(snap, durations)
    easy_site = make_dispatcher("easy", "first-fit", queue_order="site").decide(snap, durations)
    assert easy.starts == () and [s.job_id for s in easy_site.starts] == ["late"]


def test_a_cp_window_takes_the_sites_order():
    # A window of one job: the site's top job is the one modelled and started.
    queue = [prioritised(f"j{i}", 10 - i if i == 3 else 0, submit=i, units=1) for i in range(5)]
    snap = make_snapshot(10, ("cpu",), nodes(1), [], queue)
    search = SearchConfig(deterministic=True, deadline=5.0)
    chosen = make_dispatcher(
        "hcp3",
        "best-fit",
        search=search,
        model=ModelConfig(window=1, site_order=True),
        queue_order="site",  # its fallback's order
    ).decide(snap, limits_as_durations(snap))
    assert [s.job_id for s in chosen.starts] == ["j3"]


def test_the_policy_setting_reaches_every_part():
    site = Policy(priority="site")
    assert site.model_settings().site_order  # type: ignore[union-attr]
    fallback: Any = site.make_fallback()
    assert fallback.order.__name__ == "by_site_priority"
    assert not Policy().model_settings().site_order  # type: ignore[union-attr]
