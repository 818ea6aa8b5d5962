"""The queue page's order and filters, over the whole queue (not one page of it).

Only the sort key of each job is computed here (cheap: a field, a lookup); the rows
of the page shown, with what each job waits for, are built afterwards for that page
alone, so that sorting 100,000 queued jobs costs a sort, not 100,000 explanations.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, get_args
from urllib.parse import urlencode

from cpsched.core import Job, Snapshot

SortKey = Literal[
    "position", "job", "user", "partition", "qos", "priority", "limit", "predicted",
    "planned", "wait",
]  # fmt: skip
SORT_KEYS: tuple[str, ...] = get_args(SortKey)
DESCENDING_FIRST = frozenset({"priority", "wait"})
"""Keys whose first click sorts the largest first (the longest wait, the highest
priority: what an operator looks for); the others start with the smallest."""
FILTER_CHOICES = 500
"""Values offered for each filter (users, partitions, QOS names) at most."""


@dataclass(frozen=True, slots=True)
class QueueQuery:
    """What the queue page was asked for: its order and its filters ("" matches all)."""

    sort: SortKey = "position"
    descending: bool = False
    user: str = ""
    partition: str = ""
    qos: str = ""

    @property
    def filtered(self) -> bool:
        return bool(self.user or self.partition or self.qos)


@dataclass(frozen=True, slots=True)
class QueueFacts:
    """What the sort keys read besides the job itself."""

    time: int
    qos: Mapping[str, str]
    durations: Mapping[str, int]
    planned: Mapping[str, int]
    starting: frozenset[str]


_DIGITS = re.compile(r"(\d+)")


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """``job9`` before ``job10``: digits compare as numbers."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(text) if part
    )


_Key = Callable[[Job, QueueFacts], object]
_KEYS: dict[str, _Key] = {
    "job": lambda job, _: _natural(job.id),
    "user": lambda job, _: job.user or None,
    "partition": lambda job, _: job.queue or None,
    "qos": lambda job, f: f.qos.get(job.id) or None,
    "priority": lambda job, _: job.priority,
    "limit": lambda job, _: job.time_limit,
    "predicted": lambda job, f: f.durations.get(job.id),
    "planned": lambda job, f: f.time if job.id in f.starting else f.planned.get(job.id),
    "wait": lambda job, f: f.time - job.submit,
}


def _matches(job: Job, query: QueueQuery, qos: Mapping[str, str]) -> bool:
    if query.user and job.user != query.user:
        return False
    if query.partition and query.partition not in job.queue.split(","):
        return False
    return not query.qos or qos.get(job.id, "") == query.qos


def ordered(snapshot: Snapshot, query: QueueQuery, facts: QueueFacts) -> list[tuple[int, Job]]:
    """The queued jobs ``query`` keeps, in its order, each with its queue position (from
    0). Jobs without a value for the key (no priority, not planned) come last either
    way; equal keys keep the queue's order."""
    kept = [(i, job) for i, job in enumerate(snapshot.queued) if _matches(job, query, facts.qos)]
    if query.sort == "position":
        return kept[::-1] if query.descending else kept
    key = _KEYS[query.sort]
    valued = [(key(job, facts), i, job) for i, job in kept]
    present = [v for v in valued if v[0] is not None]
    present.sort(key=lambda v: v[0], reverse=query.descending)  # type: ignore[arg-type,return-value]
    return [(i, job) for _, i, job in present] + [(i, job) for k, i, job in valued if k is None]


def choices(snapshot: Snapshot, qos: Mapping[str, str]) -> dict[str, list[str]]:
    """The values each filter may take in this queue (sorted; at most
    :data:`FILTER_CHOICES` each), for the filter form's suggestions."""
    users = {job.user for job in snapshot.queued if job.user}
    partitions = {p for job in snapshot.queued for p in job.queue.split(",") if p}
    return {
        name: sorted(values)[:FILTER_CHOICES]
        for name, values in (
            ("user", users),
            ("partition", partitions),
            ("qos", {q for q in qos.values() if q}),
        )
    }


def page_of(rows: Sequence[tuple[int, Job]], page: int, size: int) -> tuple[int, int, int]:
    """The page to show (1 to the last; a page past the end shows the last), how many
    pages there are, and the shown page's first row's index in ``rows``."""
    pages = max(1, -(-len(rows) // size))
    shown = min(max(page, 1), pages)
    return shown, pages, (shown - 1) * size


def link(query: QueueQuery, page: int = 1, **changes: object) -> str:
    """The queue page's query string for ``query`` with ``changes``, at ``page``: only
    what differs from the defaults, so that the plain page stays ``?``-free."""
    q = replace(query, **changes)  # type: ignore[arg-type]
    natural = q.sort in DESCENDING_FIRST
    params = [
        ("sort", q.sort if q.sort != "position" else ""),
        ("dir", ("desc" if q.descending else "asc") if q.descending != natural else ""),
        ("user", q.user),
        ("partition", q.partition),
        ("qos", q.qos),
        ("page", str(page) if page > 1 else ""),
    ]
    return "?" + urlencode([(k, v) for k, v in params if v]) if any(v for _, v in params) else "?"


def sort_links(query: QueueQuery) -> dict[str, str]:
    """Each column's link: its own order (largest first for :data:`DESCENDING_FIRST`),
    or the other way round for the column the page is sorted by; back to page 1."""
    return {
        key: link(
            query,
            sort=key,
            descending=(not query.descending) if key == query.sort else key in DESCENDING_FIRST,
        )
        for key in SORT_KEYS
    }
