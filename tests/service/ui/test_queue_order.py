"""The queue page's order, filters and links, on a snapshot built in memory."""

from __future__ import annotations

from cpsched.core import Job, make_snapshot
from cpsched.core.problem import Node
from cpsched.service.ui.queue_order import QueueFacts, QueueQuery, link, ordered, sort_links


def _snapshot():
    jobs = [
        Job("a10", submit=10, time_limit=60, units=1, unit_request=(1,), user="u", queue="p"),
        Job("a9", submit=20, time_limit=60, units=1, unit_request=(1,), user="v", queue="p,q"),
        Job("b1", submit=30, time_limit=30, units=1, unit_request=(1,), user="u", queue="q"),
    ]
    return make_snapshot(100, ("cpu",), [Node("n", (4,))], queued=jobs)


FACTS = QueueFacts(100, {"a9": "high"}, {"a10": 50, "b1": 70}, {"b1": 400}, frozenset())


def _ids(query: QueueQuery) -> list[tuple[int, str]]:
    return [(i, job.id) for i, job in ordered(_snapshot(), query, FACTS)]


def test_ids_sort_as_numbers_and_missing_values_go_last_both_ways():
    assert _ids(QueueQuery("job")) == [(1, "a9"), (0, "a10"), (2, "b1")]
    assert _ids(QueueQuery("predicted")) == [(0, "a10"), (2, "b1"), (1, "a9")]
    assert _ids(QueueQuery("predicted", True)) == [(2, "b1"), (0, "a10"), (1, "a9")]
    assert _ids(QueueQuery("planned", True)) == [(2, "b1"), (0, "a10"), (1, "a9")]
    # Equal keys keep the queue's order, ascending or descending.
    assert _ids(QueueQuery("limit")) == [(2, "b1"), (0, "a10"), (1, "a9")]
    assert _ids(QueueQuery("limit", True)) == [(0, "a10"), (1, "a9"), (2, "b1")]


def test_filters_match_one_of_a_jobs_partitions_and_its_qos():
    assert _ids(QueueQuery(partition="q")) == [(1, "a9"), (2, "b1")]
    assert _ids(QueueQuery(user="u", sort="position", descending=True)) == [(2, "b1"), (0, "a10")]
    assert _ids(QueueQuery(qos="high")) == [(1, "a9")]
    assert _ids(QueueQuery(qos="low")) == []


def test_links_carry_only_what_differs_from_the_defaults():
    assert link(QueueQuery()) == "?"
    assert link(QueueQuery("wait", True), 2) == "?sort=wait&page=2"  # largest first: natural
    assert link(QueueQuery("wait", False, user="a b&c")) == "?sort=wait&dir=asc&user=a+b%26c"
    links = sort_links(QueueQuery("limit", user="u"))
    assert links["limit"] == "?sort=limit&dir=desc&user=u"  # the column sorted: the other way
    assert links["priority"] == "?sort=priority&user=u"
    assert links["position"] == "?user=u"
