"""What a cluster's dispatches promised and must keep across a service restart.

Two things a restart must not forget: the wait bound's start guarantees (otherwise every
one is given again from scratch, later, and counted as broken) and the writer lease
(otherwise whichever bridge posts first after a restart, a standby too, takes the
cluster over). Both are small and change seldom: they are stored in the cluster's
``cluster_state`` row with a dispatch's audit row, in the same transaction, only when
they changed (the writer's time only once a quarter of the lease has passed), and read
back when the cluster's runtime is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cpsched.core.state import Guarantee
from cpsched.service.lease import WriterLease

GuaranteeRows = tuple[tuple[str, int, int, tuple[tuple[str, int], ...], int], ...]
"""Each guarantee as (job, start_by, start, placement, given), in job order."""


@dataclass(frozen=True, slots=True)
class KeptState:
    guarantees: GuaranteeRows
    writer: str | None
    writer_seen: float | None
    """When the writer last dispatched, in seconds since the epoch."""

    @classmethod
    def of(
        cls, guarantees: Mapping[str, Guarantee], lease: WriterLease, wall: float, mono: float
    ) -> KeptState:
        """The state now; ``wall`` and ``mono`` are the same instant on the service's
        epoch and monotonic clocks (the lease runs on the latter)."""
        rows = tuple(
            (job_id, g.start_by, g.start, g.placement, g.given)
            for job_id, g in sorted(guarantees.items())
        )
        seen = wall - (mono - lease.renewed) if lease.holder is not None else None
        return cls(rows, lease.holder, seen)

    def differs(self, stored: KeptState | None, lease_s: float) -> bool:
        """Whether this must be written, ``stored`` being what was last written."""
        if stored is None or (self.guarantees, self.writer) != (stored.guarantees, stored.writer):
            return True
        if self.writer_seen is None or stored.writer_seen is None:
            return self.writer_seen != stored.writer_seen
        return self.writer_seen - stored.writer_seen >= lease_s / 4

    def guarantee_dicts(self) -> list[dict[str, Any]]:
        """The guarantees as the row's JSON stores them."""
        return [
            {
                "job": job_id,
                "start_by": start_by,
                "start": start,
                "placement": [list(pair) for pair in placement],
                "given": given,
            }
            for job_id, start_by, start, placement, given in self.guarantees
        ]

    @classmethod
    def from_row(
        cls, guarantees: list[Any], writer: str | None, writer_seen: float | None
    ) -> KeptState:
        """The state a stored row holds. Rows that do not read as guarantees (hand-edited,
        or from a later version) are left out: the wait bound then gives those jobs new
        guarantees, which is what a restart did before guarantees were stored."""
        rows = []
        for item in guarantees:
            try:
                placement = tuple((str(name), int(units)) for name, units in item["placement"])
                rows.append(
                    (
                        str(item["job"]),
                        int(item["start_by"]),
                        int(item["start"]),
                        placement,
                        int(item["given"]),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
        return cls(tuple(sorted(rows)), writer, writer_seen)

    def restore(
        self, guarantees: dict[str, Guarantee], lease: WriterLease, wall: float, mono: float
    ) -> None:
        """Put the state back into a runtime's dispatcher state and lease: the lease's time
        left is what it was when last stored, less the time since (never more)."""
        guarantees.clear()
        for job_id, start_by, start, placement, given in self.guarantees:
            guarantees[job_id] = Guarantee(start_by, start, placement, given)
        if self.writer is not None and self.writer_seen is not None:
            lease.holder = self.writer
            lease.renewed = mono - max(0.0, wall - self.writer_seen)
