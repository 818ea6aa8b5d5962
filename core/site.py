"""The site's rules: partitions, node features, exclusive jobs, node counts, eligibility
and reservations — what a job may use, as the workload manager itself would allow it.

A snapshot without rules (no partitions, no reservations, no job with
:class:`Constraints`) is one pool of nodes, as before: every function here answers
"anything goes" for it at the cost of one attribute test, so replays of plain traces pay
nothing. With rules, a job may start only

* when it is *eligible*: the workload manager does not hold it back (a dependency, a
  begin time, a QOS or association limit, a user hold: ``Constraints.reason`` says
  which), its time limit is within one of its partitions' ``max_time``, and the
  reservation it asks for, if any, is in its window now;
* on nodes of one of its partitions (any node when it names none) that carry its
  features, within the partition's ``max_nodes`` and its own node count
  (``min_nodes``..``max_nodes``, at most ``tasks_per_node`` units on a node);
* for an exclusive job, on nodes nothing else uses, which it then takes whole;
* inside its reservation's nodes if it names one; otherwise never on the nodes of a
  reservation its time limit would overlap (``[now, now + limit)`` meets
  ``[start, end)``): a maintenance window is neither planned nor backfilled across.

Reservation windows are checked with the job's *limit*, not its predicted run time:
the workload manager kills a job at its limit and keeps reservations by it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cpsched.errors import SnapshotError

NodeSet = frozenset[int]
"""Node indices (into ``Snapshot.nodes``)."""


@dataclass(frozen=True, slots=True)
class Partition:
    """A named set of nodes with its limits (Slurm's partition, PBS's queue)."""

    name: str
    nodes: NodeSet
    max_time: int | None = None
    """Longest time limit a job may have to run here, seconds (None: no limit)."""
    max_nodes: int | None = None
    """Most nodes one job may use here (None: no limit)."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """Nodes set aside from ``start`` to ``end`` for the jobs that name it."""

    name: str
    nodes: NodeSet
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise SnapshotError(
                f"reservation {self.name!r} ends ({self.end}) before it starts ({self.start})"
            )


@dataclass(frozen=True, slots=True)
class Site:
    """The snapshot-wide rules: partitions by name and reservations."""

    partitions: Mapping[str, Partition] = field(default_factory=dict)
    reservations: tuple[Reservation, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.partitions and not self.reservations


NO_SITE = Site()


@dataclass(frozen=True, slots=True)
class Features:
    """A node-feature requirement in disjunctive normal form.

    A node qualifies when it has every feature of at least one ``alternatives`` entry.
    ``same_for_all`` (Slurm's ``[a|b]``) asks that all of a job's nodes qualify through
    the same alternative.
    """

    alternatives: tuple[frozenset[str], ...]
    same_for_all: bool = False
    text: str = ""

    def admits(self, features: frozenset[str]) -> bool:
        return any(alt <= features for alt in self.alternatives)


_TOKEN = re.compile(r"\s*([A-Za-z0-9_.:+/-]+|[&|()\[\],])")


def parse_features(text: str) -> Features:
    """Slurm's ``--constraint`` syntax: names joined by ``&`` (and, also ``,``) and ``|``
    (or), parentheses, and one enclosing ``[...]`` for "all nodes the same alternative".

    Feature counts (``a*2``) and nested brackets are refused with a SnapshotError that
    says so: cpsched cannot honour them, so such a job must not be sent as plannable.
    """
    source = text.strip()
    same_for_all = source.startswith("[") and source.endswith("]")
    body = source[1:-1] if same_for_all else source
    tokens: list[str] = []
    position = 0
    while position < len(body):
        match = _TOKEN.match(body, position)
        if match is None:
            if body[position:].strip() == "":
                break
            raise SnapshotError(
                f"feature expression {text!r}: cannot read {body[position:]!r} "
                "(supported: names, &, |, parentheses, one enclosing [...]; no counts a*2)"
            )
        tokens.append(match.group(1))
        position = match.end()
    if not tokens or "[" in tokens or "]" in tokens:
        raise SnapshotError(f"feature expression {text!r} is empty or nests brackets")
    alternatives, rest = _or(tokens, 0, text)
    if rest != len(tokens):
        raise SnapshotError(f"feature expression {text!r}: unexpected {tokens[rest]!r}")
    unique = tuple(dict.fromkeys(alternatives))
    return Features(unique, same_for_all, source)


def _or(tokens: list[str], at: int, text: str) -> tuple[list[frozenset[str]], int]:
    alternatives, at = _and(tokens, at, text)
    while at < len(tokens) and tokens[at] == "|":
        more, at = _and(tokens, at + 1, text)
        alternatives = alternatives + more
    return alternatives, at


def _and(tokens: list[str], at: int, text: str) -> tuple[list[frozenset[str]], int]:
    alternatives, at = _atom(tokens, at, text)
    while at < len(tokens) and tokens[at] in ("&", ","):
        right, at = _atom(tokens, at + 1, text)
        alternatives = [a | b for a in alternatives for b in right]
    return alternatives, at


def _atom(tokens: list[str], at: int, text: str) -> tuple[list[frozenset[str]], int]:
    if at >= len(tokens):
        raise SnapshotError(f"feature expression {text!r} ends too early")
    token = tokens[at]
    if token == "(":
        inner, at = _or(tokens, at + 1, text)
        if at >= len(tokens) or tokens[at] != ")":
            raise SnapshotError(f"feature expression {text!r}: missing ')'")
        return inner, at + 1
    if token in "&|),":
        raise SnapshotError(f"feature expression {text!r}: unexpected {token!r}")
    return [frozenset((token,))], at + 1


@dataclass(frozen=True, slots=True)
class Constraints:
    """What the site's rules say about one job (absent: none of them applies)."""

    partitions: tuple[str, ...] = ()
    """The partitions it may run in (any of them; empty: anywhere)."""
    features: Features | None = None
    exclusive: bool = False
    min_nodes: int = 1
    max_nodes: int | None = None
    tasks_per_node: int | None = None
    """Most units on one node (Slurm's ``--ntasks-per-node``)."""
    reservation: str = ""
    eligible: bool = True
    reason: str = ""
    """Why the workload manager holds it back when not ``eligible`` (its reason code)."""

    def __post_init__(self) -> None:
        if self.min_nodes < 1:
            raise SnapshotError(f"min_nodes must be >= 1, got {self.min_nodes}")
        if self.max_nodes is not None and self.max_nodes < self.min_nodes:
            raise SnapshotError(
                f"max_nodes ({self.max_nodes}) is below min_nodes ({self.min_nodes})"
            )
        if self.tasks_per_node is not None and self.tasks_per_node < 1:
            raise SnapshotError(f"tasks_per_node must be >= 1, got {self.tasks_per_node}")

    @property
    def counts_nodes(self) -> bool:
        """Whether the number of nodes or the units per node is constrained."""
        return self.min_nodes > 1 or self.max_nodes is not None or self.tasks_per_node is not None


NO_CONSTRAINTS = Constraints()


@dataclass(frozen=True, slots=True)
class NodeChoice:
    """One way a job may be placed: on these nodes (None: any), with at most
    ``max_nodes`` of them."""

    nodes: NodeSet | None
    max_nodes: int | None


def ineligible_reason(
    constraints: Constraints | None, time_limit: int, site: Site, now: int
) -> str | None:
    """Why a job may not start at ``now`` whatever the nodes, or None if it may."""
    if constraints is None:
        return None
    if not constraints.eligible:
        return constraints.reason or "held back by the workload manager"
    if constraints.partitions and site.partitions:
        limits = [site.partitions[p].max_time for p in constraints.partitions]
        if all(m is not None and time_limit > m for m in limits):
            return "time limit over its partition's MaxTime (PartitionTimeLimit)"
    if constraints.reservation:
        reservation = _reservation(site, constraints.reservation)
        if now < reservation.start:
            return f"waits for its reservation {reservation.name} to start at {reservation.start}"
        if now >= reservation.end:
            return f"its reservation {reservation.name} ended at {reservation.end}"
    return None


def node_choices(
    constraints: Constraints | None,
    time_limit: int,
    site: Site,
    node_features: Sequence[frozenset[str]],
    now: int,
) -> list[NodeChoice]:
    """The node sets a job starting at ``now`` may be placed on, one per partition it may
    use (and per alternative, for ``[a|b]`` features); ``[NodeChoice(None, None)]`` when
    nothing restricts it. Empty when nowhere: no partition or node qualifies."""
    if constraints is None and not site.reservations:
        return [NodeChoice(None, None)]
    bases: list[tuple[NodeSet | None, int | None]] = []
    if constraints is not None and constraints.partitions and site.partitions:
        for name in constraints.partitions:
            part = site.partitions[name]
            if part.max_time is None or time_limit <= part.max_time:
                bases.append((part.nodes, part.max_nodes))
    else:
        bases.append((None, None))
    blocked = _reserved_for_others(constraints, time_limit, site, now)
    allowed_in = None
    if constraints is not None and constraints.reservation:
        allowed_in = _reservation(site, constraints.reservation).nodes
    features = constraints.features if constraints is not None else None
    groups: list[Features | None] = [None]
    if features is not None:
        groups = (
            [Features((alt,)) for alt in features.alternatives]
            if features.same_for_all
            else [features]
        )
    every = range(len(node_features))
    choices: list[NodeChoice] = []
    for nodes, max_nodes in bases:
        for group in groups:
            if nodes is None and allowed_in is None and group is None and not blocked:
                choices.append(NodeChoice(None, max_nodes))
                continue
            candidates = nodes if nodes is not None else every
            chosen = frozenset(
                n
                for n in candidates
                if n not in blocked
                and (allowed_in is None or n in allowed_in)
                and (group is None or group.admits(node_features[n]))
            )
            if len(chosen) == len(node_features):
                choices.append(NodeChoice(None, max_nodes))  # every node: nothing to mask
            elif chosen:
                choices.append(NodeChoice(chosen, max_nodes))
    return choices


def reservations_in_the_way(
    constraints: Constraints | None, time_limit: int, site: Site, now: int
) -> list[Reservation]:
    """The reservations a job does not belong to whose window its run from ``now`` to
    its limit would meet."""
    mine = constraints.reservation if constraints is not None else ""
    end = now + time_limit
    return [r for r in site.reservations if r.name != mine and r.start < end and now < r.end]


def _reserved_for_others(
    constraints: Constraints | None, time_limit: int, site: Site, now: int
) -> NodeSet:
    """Nodes of the reservations in the job's way."""
    in_the_way = reservations_in_the_way(constraints, time_limit, site, now)
    return frozenset(n for reservation in in_the_way for n in reservation.nodes)


def _reservation(site: Site, name: str) -> Reservation:
    for reservation in site.reservations:
        if reservation.name == name:
            return reservation
    raise SnapshotError(f"a job asks for reservation {name!r}, which the snapshot does not list")


def node_limits(constraints: Constraints | None, choice: NodeChoice) -> tuple[int, int | None]:
    """The fewest and most nodes a placement on ``choice`` may use."""
    low = constraints.min_nodes if constraints is not None else 1
    high = constraints.max_nodes if constraints is not None else None
    if choice.max_nodes is not None:
        high = choice.max_nodes if high is None else min(high, choice.max_nodes)
    return low, high


def can_ever_run(
    constraints: Constraints | None,
    units: int,
    unit_request: Sequence[int],
    time_limit: int,
    site: Site,
    capacities: Sequence[Sequence[int]],
) -> bool:
    """Whether a job fits, on the idle machine (``capacities``: each node's), in one of
    its partitions within its limits and its node counts (fewest and most nodes, units
    per node); a job that does not can never start."""
    if constraints is None:
        return True
    wanted = [(r, a) for r, a in enumerate(unit_request) if a]
    if constraints.partitions:
        places = [site.partitions[name] for name in constraints.partitions]
        choices: list[tuple[Iterable[int], int | None, int | None]] = [
            (p.nodes, p.max_nodes, p.max_time) for p in places
        ]
    elif constraints.counts_nodes:
        choices = [(range(len(capacities)), None, None)]
    else:
        return True
    for nodes, partition_max_nodes, max_time in choices:
        if max_time is not None and time_limit > max_time:
            continue
        if _fits_node_counts(constraints, units, wanted, capacities, nodes, partition_max_nodes):
            return True
    return False


def _fits_node_counts(
    constraints: Constraints,
    units: int,
    wanted: Sequence[tuple[int, int]],
    capacities: Sequence[Sequence[int]],
    nodes: Iterable[int],
    partition_max_nodes: int | None,
) -> bool:
    """Whether ``units`` fit on ``nodes`` when idle, on at least ``min_nodes`` of them
    (one unit each at least) and at most the job's and the partition's ``max_nodes``,
    with at most ``tasks_per_node`` on each."""
    per_node = constraints.tasks_per_node
    fits = sorted((min(capacities[n][r] // a for r, a in wanted) for n in nodes), reverse=True)
    usable = [f if per_node is None else min(f, per_node) for f in fits if f > 0]
    if len(usable) < constraints.min_nodes or constraints.min_nodes > units:
        return False
    limits = [m for m in (constraints.max_nodes, partition_max_nodes) if m is not None]
    if limits:
        usable = usable[: min(limits)]
    return sum(usable) >= units
