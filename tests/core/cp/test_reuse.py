"""Reuse between calls (``SearchConfig.reuse``): the previous call's plan order as a hint."""

from __future__ import annotations

import dataclasses

import pytest

from cpsched.core.cp import make_cp_dispatcher
from cpsched.core.cp.greedy import candidate_plans, previous_order
from tests.core.cp._util import DETERMINISTIC, decide, prepared_of
from tests.factories import job, limits_as_durations, nodes, running, snapshot

REUSE = dataclasses.replace(DETERMINISTIC, reuse=True)


def _busy_queue(t: int = 10):
    """Four queued jobs, each able to start on the two free cores, not all at once: the
    model has to order them."""
    r = job("r", units=2, limit=100)
    queue = [job(f"q{i}", submit=i, units=1 + i % 2, limit=20 + 30 * i) for i in range(4)]
    return snapshot(t, nodes(4), [running(r, 0, [(0, 2)])], queue)


def test_previous_order_sorts_by_the_previous_plan_and_puts_new_jobs_last():
    prepared = prepared_of(_busy_queue())
    ids = [mj.job.id for mj in prepared.jobs]
    reverse = {job_id: 1000 - i for i, job_id in enumerate(ids[1:])}  # the first is new
    order = previous_order(prepared, reverse)
    assert order is not None
    assert [mj.job.id for mj in order] == [*ids[1:][::-1], ids[0]]


def test_previous_order_is_none_without_overlap_or_when_it_is_the_priority_order():
    prepared = prepared_of(_busy_queue())
    ids = [mj.job.id for mj in prepared.jobs]
    assert previous_order(prepared, {}) is None
    assert previous_order(prepared, {"gone": 5}) is None
    assert previous_order(prepared, {job_id: i for i, job_id in enumerate(ids)}) is None


def test_the_previous_plan_is_one_more_candidate_hint():
    prepared = prepared_of(_busy_queue())
    order = previous_order(prepared, {mj.job.id: -i for i, mj in enumerate(prepared.jobs)})
    plans = candidate_plans(prepared, [], order)
    assert set(plans) == {"priority greedy", "ratio greedy", "heuristic-seeded", "previous plan"}
    starts = plans["previous plan"]
    # The order is the reverse priority order: the last job in priority is placed first,
    # on the free cores now.
    assert starts[prepared.jobs[-1].job.id] == 0


@pytest.mark.parametrize("name", ["hcp3", "pcp3", "pcp20"])
def test_a_dispatcher_remembers_its_plan_and_offers_it_next_call(name):
    snap = _busy_queue(10)
    dispatcher = make_cp_dispatcher(name, "best-fit", search=REUSE)
    decision = decide(snap, dispatcher=dispatcher)
    assert dispatcher.state.previous_planned == dict(decision.planned)
    # A remembered plan in another order than priority's is offered on the next call.
    prepared = prepared_of(snap)
    dispatcher.state.previous_planned = {mj.job.id: -i for i, mj in enumerate(prepared.jobs)}
    again = decide(dataclasses.replace(snap, time=15), dispatcher=dispatcher)
    hint = next(note for note in again.diagnostics.notes if note.startswith("hint: "))
    assert "previous plan" in hint.partition("objectives")[2]


def test_reuse_off_keeps_no_state_and_offers_no_previous_plan():
    snap = _busy_queue()
    dispatcher = make_cp_dispatcher("hcp3", "best-fit", search=DETERMINISTIC)
    for _ in range(2):
        decision = decide(snap, dispatcher=dispatcher)
    assert dispatcher.state.previous_planned == {}
    assert not any("previous plan" in note for note in decision.diagnostics.notes)


def test_a_stale_previous_plan_only_adds_a_hint_and_decisions_stay_valid():
    # A plan of jobs that have since started or left must not break the next call.
    dispatcher = make_cp_dispatcher("pcp20", "best-fit", search=REUSE)
    dispatcher.state.previous_planned = {"q3": 0, "gone": 3, "q0": 10_000}
    snap = _busy_queue()
    decision = decide(snap, limits_as_durations(snap), dispatcher)
    assert decision.diagnostics.fallback is False
    hint = next(note for note in decision.diagnostics.notes if note.startswith("hint: "))
    assert "previous plan" in hint.partition("objectives")[2]
