"""One writer per cluster: the bridge whose dispatches a cluster's decisions follow.

Two bridges posting for one cluster (a backup controller's, an old one still running)
would each be promised the same nodes. Each bridge names itself on every dispatch
(the ``X-Cpsched-Writer`` header: its host and an id kept in its state file); the first
to dispatch holds the cluster's lease, renewed by each of its dispatches, and another
writer's dispatch is refused (423) until the holder has been silent for the lease's
duration: a standby then takes over. Dry runs (shadow mode) and calls that name no
writer are not checked: they promise nothing, or come from a replay or a person.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpsched.errors import CpschedError
from cpsched.wire.schemas import WRITER_HEADER

__all__ = ["WRITER_HEADER", "WriterConflict", "WriterLease"]


class WriterConflict(CpschedError):
    """Another writer holds the cluster's lease."""

    def __init__(self, cluster: str, writer: str, holder: str, expires_in: float) -> None:
        self.cluster, self.writer, self.holder = cluster, writer, holder
        super().__init__(
            f"cluster {cluster}: bridge {holder!r} holds its writer lease (it expires "
            f"{expires_in:.0f} s after that bridge's latest dispatch); this bridge "
            f"({writer!r}) is a standby and its dispatch is refused: run one bridge per "
            "cluster. A standby takes over once the active bridge has been silent for the "
            "lease (the service's writer_lease_s)"
        )


@dataclass
class WriterLease:
    """Who dispatches for one cluster, and when it last did (service monotonic time)."""

    holder: str | None = None
    renewed: float = 0.0

    def claim(self, cluster: str, writer: str, now: float, duration: float) -> bool:
        """Take or renew the lease for ``writer``; True when it changed hands (a new or
        returning holder). :class:`WriterConflict` while another writer holds it."""
        if self.holder is not None and self.holder != writer:
            left = self.renewed + duration - now
            if left > 0:
                raise WriterConflict(cluster, writer, self.holder, left)
        changed = self.holder != writer
        self.holder, self.renewed = writer, now
        return changed
