"""The site's rules: partitions, features, exclusive jobs, node counts, eligibility and
reservations, honoured by every dispatcher and checked by the validator."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.core import Job, Node, decision_violations, make_dispatcher, make_snapshot
from cpsched.core.cp import SearchConfig
from cpsched.core.problem import Decision, Snapshot, Start
from cpsched.core.site import Constraints, Partition, Reservation, Site, parse_features
from cpsched.errors import SnapshotError
from tests.factories import job, limits_as_durations, running

# -- the feature expressions ----------------------------------------------------------------


def test_features_and_binds_tighter_than_or():
    f = parse_features("a&b|c")
    assert set(f.alternatives) == {frozenset({"a", "b"}), frozenset({"c"})}
    assert f.admits(frozenset({"a", "b", "x"})) and f.admits(frozenset({"c"}))
    assert not f.admits(frozenset({"a"}))


def test_features_parentheses_distribute():
    f = parse_features("ib&(skylake|icelake)")
    assert set(f.alternatives) == {frozenset({"ib", "skylake"}), frozenset({"ib", "icelake"})}


def test_brackets_ask_for_one_alternative_on_every_node():
    f = parse_features("[rack1|rack2]")
    assert f.same_for_all and len(f.alternatives) == 2


@pytest.mark.parametrize("bad", ["", "a&", "a*2", "(a|b", "a||b", "[a|[b]]", "a;b"])
def test_unsupported_or_broken_expressions_are_refused_with_the_reason(bad: str):
    with pytest.raises(SnapshotError, match="feature expression"):
        parse_features(bad)


# -- unit cases -----------------------------------------------------------------------------


def cpu_nodes(*caps: int, features: dict[int, set[str]] | None = None) -> tuple[Node, ...]:
    features = features or {}
    return tuple(Node(f"n{i}", (c,), frozenset(features.get(i, set()))) for i, c in enumerate(caps))


def ruled(j: Job, **rules: object) -> Job:
    return replace(j, constraints=Constraints(**rules))  # type: ignore[arg-type]


def decide(snap: Snapshot, name: str = "easy", allocator: str = "first-fit") -> Decision:
    decision = make_dispatcher(name, allocator).decide(snap, limits_as_durations(snap))
    assert decision_violations(snap, decision) == []
    return decision


def started(decision: Decision) -> dict[str, tuple[tuple[int, int], ...]]:
    return {s.job_id: s.allocation for s in decision.starts}


TWO_PARTITIONS = Site(
    partitions={
        "cpu": Partition("cpu", frozenset({0, 1})),
        "gpu": Partition("gpu", frozenset({2, 3}), max_time=3600, max_nodes=1),
    }
)


def test_a_job_goes_only_to_its_partitions_nodes():
    snap = make_snapshot(
        0,
        ("cpu",),
        cpu_nodes(4, 4, 4, 4),
        [],
        [ruled(job("g", units=2), partitions=("gpu",))],
        TWO_PARTITIONS,
    )
    assert {n for n, _ in started(decide(snap))["g"]} <= {2, 3}


def test_a_partitions_max_time_and_max_nodes_hold():
    over = ruled(job("long", limit=7200), partitions=("gpu",))
    wide = ruled(job("wide", units=6, submit=1), partitions=("gpu",))
    either = ruled(job("either", units=6, submit=2, limit=7200), partitions=("gpu", "cpu"))
    snap = make_snapshot(
        0, ("cpu",), cpu_nodes(4, 4, 4, 4), [], [over, wide, either], TWO_PARTITIONS
    )
    got = started(decide(snap))
    assert "long" not in got  # over gpu's MaxTime: Slurm's PartitionTimeLimit
    assert "wide" not in got  # 6 units need 2 nodes; gpu allows 1 per job
    assert {n for n, _ in got["either"]} <= {0, 1}  # too long for gpu, fits cpu


def test_ineligible_jobs_never_start_and_do_not_block_the_queue():
    held = ruled(job("dep", units=1), eligible=False, reason="Dependency")
    snap = make_snapshot(0, ("cpu",), cpu_nodes(2), [], [held, job("next", submit=1)])
    for name in ("fcfs", "easy", "sjf"):
        assert set(started(decide(snap, name))) == {"next"}


def test_features_pick_the_nodes_and_brackets_keep_one_alternative():
    machine = cpu_nodes(2, 2, 2, 2, features={0: {"a"}, 1: {"b"}, 2: {"a", "ib"}, 3: {"b"}})
    anyof = ruled(job("or", units=4), features=parse_features("a|b"))
    snap = make_snapshot(0, ("cpu",), machine, [], [anyof])
    assert len(started(decide(snap))["or"]) == 2
    same = ruled(job("same", units=3), features=parse_features("[a|b]"))
    snap = make_snapshot(0, ("cpu",), machine, [running(job("r"), 0, [(0, 1)])], [same])
    nodes_used = {n for n, _ in started(decide(snap))["same"]}
    assert nodes_used in ({1, 3}, {0, 2})
    both = ruled(job("ib", units=1), features=parse_features("a&ib"))
    assert started(decide(make_snapshot(0, ("cpu",), machine, [], [both])))["ib"] == ((2, 1),)


def test_an_exclusive_job_takes_whole_free_nodes_and_keeps_others_off():
    excl = ruled(job("x", units=1), exclusive=True)
    small = job("s", units=1, submit=1)
    snap = make_snapshot(
        0, ("cpu",), cpu_nodes(4, 4), [running(job("r"), 0, [(0, 1)])], [excl, small]
    )
    got = started(decide(snap))
    assert got["x"] == ((1, 1),)  # node 0 is in use
    assert got["s"] == ((0, 1),)  # not beside the exclusive job
    # Running, it leaves its node's room to nobody.
    after = make_snapshot(
        0,
        ("cpu",),
        cpu_nodes(4, 4),
        [running(excl, 0, [(1, 1)]), running(job("r"), 0, [(0, 1)])],
        [job("t", units=4)],
    )
    assert after.free[1] == (0,)
    assert "t" not in started(decide(after))


def test_node_counts_and_units_per_node_hold():
    two = ruled(job("N2", units=2), min_nodes=2, max_nodes=2)
    per = ruled(job("tpn", units=4, submit=1), tasks_per_node=2)
    snap = make_snapshot(0, ("cpu",), cpu_nodes(8, 8, 8), [], [two, per])
    got = started(decide(snap, allocator="best-fit"))
    assert len(got["N2"]) == 2
    assert all(u <= 2 for _, u in got["tpn"]) and sum(u for _, u in got["tpn"]) == 4


def test_nobody_runs_into_a_maintenance_window_but_its_members():
    site = Site(reservations=(Reservation("maint", frozenset({0}), 500, 900),))
    long = job("long", limit=600)  # [0, 600) meets [500, 900)
    short = job("short", limit=400, submit=1)  # ends before the window
    snap = make_snapshot(0, ("cpu",), cpu_nodes(1, 1), [], [long, short], site)
    got = started(decide(snap))
    assert got["long"] == ((1, 1),) and got["short"] == ((0, 1),)
    member = ruled(job("m"), reservation="maint")
    early = make_snapshot(100, ("cpu",), cpu_nodes(1, 1), [], [member], site)
    assert started(decide(early)) == {}  # its window has not begun
    inside = make_snapshot(600, ("cpu",), cpu_nodes(1, 1), [], [member], site)
    assert started(decide(inside))["m"] == ((0, 1),)


def test_the_validator_names_each_broken_rule():
    site = Site(
        partitions={"p": Partition("p", frozenset({0}))},
        reservations=(Reservation("r", frozenset({1}), 10, 20),),
    )
    machine = cpu_nodes(2, 2, features={0: {"a"}})
    queue = [
        ruled(job("part"), partitions=("p",)),
        ruled(job("feat"), features=parse_features("a")),
        ruled(job("held"), eligible=False, reason="Dependency"),
        job("resv", limit=50),
    ]
    snap = make_snapshot(0, ("cpu",), machine, [], queue, site)
    bad = Decision(starts=tuple(Start(j.id, ((1, 1),)) for j in queue))
    text = " | ".join(decision_violations(snap, bad))
    for expected in ("partitions p", "features 'a'", "not eligible: Dependency", "reservation r"):
        assert expected in text


# -- every dispatcher, random clusters ------------------------------------------------------


@st.composite
def ruled_clusters(draw: st.DrawFn) -> Snapshot:
    count = draw(st.integers(2, 6))
    names = ["a", "b", "c"]
    machine = tuple(
        Node(
            f"n{i}",
            (draw(st.integers(1, 6)),),
            frozenset(draw(st.sets(st.sampled_from(names), max_size=2))),
        )
        for i in range(count)
    )
    split = draw(st.integers(1, count - 1))
    partitions = {
        "p0": Partition("p0", frozenset(range(split)), max_nodes=draw(st.sampled_from([None, 1]))),
        "p1": Partition(
            "p1", frozenset(range(split, count)), max_time=draw(st.sampled_from([None, 200]))
        ),
        "all": Partition("all", frozenset(range(count))),
    }
    res_nodes = frozenset(draw(st.sets(st.integers(0, count - 1), min_size=1, max_size=2)))
    start = draw(st.integers(0, 300))
    reservation = Reservation("r", res_nodes, start, start + draw(st.integers(1, 300)))
    site = Site(partitions, (reservation,))
    run = []
    for i in range(count):
        if draw(st.booleans()):
            r = job(f"r{i}", units=1, limit=draw(st.integers(10, 400)))
            exclusive = draw(st.booleans())
            if exclusive:
                r = ruled(r, exclusive=True)
            run.append(running(r, 0, [(i, 1)]))
    queue = []
    for i in range(draw(st.integers(1, 10))):
        q = job(f"q{i}", submit=i, units=draw(st.integers(1, 8)), limit=draw(st.integers(10, 400)))
        rules: dict[str, object] = {}
        if draw(st.booleans()):
            rules["partitions"] = tuple(
                draw(
                    st.lists(
                        st.sampled_from(sorted(partitions)), min_size=1, max_size=2, unique=True
                    )
                )
            )
        if draw(st.booleans()):
            rules["features"] = parse_features(draw(st.sampled_from(["a", "a|b", "[a|b]", "a&c"])))
        if draw(st.booleans()):
            rules["exclusive"] = True
        if draw(st.booleans()):
            low = draw(st.integers(1, 3))
            rules["min_nodes"] = low
            rules["max_nodes"] = draw(st.sampled_from([None, low, low + 1]))
        if draw(st.booleans()):
            rules["tasks_per_node"] = draw(st.integers(1, 4))
        if draw(st.integers(0, 4)) == 0:
            rules["reservation"] = "r"
        if draw(st.integers(0, 4)) == 0:
            rules["eligible"] = False
            rules["reason"] = "Dependency"
        queue.append(ruled(q, **rules) if rules else q)
    return make_snapshot(draw(st.integers(0, 400)), ("cpu",), machine, run, queue, site)


HEURISTIC_CASES = [
    ("fcfs", "first-fit", 1),
    ("sjf", "best-fit", 1),
    ("easy", "first-fit", 1),
    ("easy", "best-fit", 1),
    ("easy", "best-fit", 50),  # conservative backfilling
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=ruled_clusters(), case=st.sampled_from(HEURISTIC_CASES))
def test_no_heuristic_decision_ever_breaks_a_site_rule(snap: Snapshot, case: tuple[str, str, int]):
    name, allocator, depth = case
    dispatcher = make_dispatcher(name, allocator, backfill_depth=depth)
    decision = dispatcher.decide(snap, limits_as_durations(snap))
    assert decision_violations(snap, decision) == []
    # They honour the rules where they place: the last guard never has to drop a start.
    assert not any("start dropped" in note for note in decision.diagnostics.notes)
    held = {j.id for j in snap.queued if j.constraints is not None and not j.constraints.eligible}
    assert not held & {s.job_id for s in decision.starts}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=ruled_clusters(), name=st.sampled_from(["hcp3", "pcp3", "pcp20"]))
def test_no_cp_decision_ever_breaks_a_site_rule(snap: Snapshot, name: str):
    search = SearchConfig(deterministic=True, deadline=5.0)
    dispatcher = make_dispatcher(name, "best-fit", search=search)
    decision = dispatcher.decide(snap, limits_as_durations(snap))
    assert decision_violations(snap, decision) == []


def test_a_snapshot_without_rules_decides_as_before():
    queue = [job(f"q{i}", submit=i, units=1 + i % 3, limit=50 + 10 * i) for i in range(12)]
    snap = make_snapshot(
        0, ("cpu",), cpu_nodes(4, 4, 4), [running(job("r", limit=80), 0, [(0, 3)])], queue
    )
    ruled_queue = [ruled(j) for j in queue]  # rules that say nothing
    same = make_snapshot(
        0,
        ("cpu",),
        cpu_nodes(4, 4, 4),
        snap.running,
        ruled_queue,
        Site(partitions={"all": Partition("all", frozenset({0, 1, 2}))}),
    )
    for name in ("fcfs", "easy"):
        assert decide(snap, name).starts == decide(same, name).starts
