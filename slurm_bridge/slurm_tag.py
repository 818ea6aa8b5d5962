"""The hold tag the kit's job_submit.lua writes into a job's AdminComment, and the node
range it records there.

A held job's own maximum node count is lost on Slurm 24.11: every job held at
submission shows a maximum equal to its minimum (``NumNodes=1-1`` for ``-n 3``, ``2-2``
for ``-n 14``), which Slurm itself does not hold it to once released, while a user's
``-N 1 -n 3`` looks the same and is held to it (pinned to two nodes it stays pending,
``BadConstraints``). The kit therefore records at submission what the user asked:
``extsched,max_nodes=2`` (``-N 2`` or ``-N 1-2``) or ``extsched,max_nodes=none``. Only
Slurm's administrators and the kit can write AdminComment, so the record is trusted; a
bare ``extsched`` (an older kit) records nothing, and the maximum Slurm shows is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RECORD = re.compile(r",max_nodes=(none|\d+)")


@dataclass(frozen=True, slots=True)
class HoldTag:
    tagged: bool
    max_nodes: int | None = None
    """The user's own maximum node count (0: none asked); None: not recorded."""

    def node_limit(self, shown: int | None) -> int | None:
        """The job's maximum node count: as recorded by the kit, else as Slurm shows it
        (None or 0: not limited)."""
        if self.max_nodes is None:
            return shown
        return self.max_nodes or None


def read_tag(admin_comment: str, tag: str) -> HoldTag:
    """``admin_comment`` of a job → whether it carries ``tag`` and what it records."""
    if admin_comment == tag:
        return HoldTag(tagged=True)
    if not admin_comment.startswith(tag):
        return HoldTag(tagged=False)
    record = _RECORD.fullmatch(admin_comment[len(tag) :])
    if record is None:
        return HoldTag(tagged=False)
    value = record.group(1)
    return HoldTag(tagged=True, max_nodes=0 if value == "none" else int(value))
