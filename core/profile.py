"""The free capacity from now on, as steps in time (:mod:`cpsched.core.profile_base`),
held in the representation that suits the machine: one dense array while steps × nodes
is small, per-node releases and jobs taken beyond (the same answers, to the unit)."""

from __future__ import annotations

from cpsched.core.capacity import FreeCapacity
from cpsched.core.dense_profile import DenseProfile
from cpsched.core.reservation import Release
from cpsched.core.sparse_profile import SparseProfile

Profile = DenseProfile | SparseProfile

DENSE_CELLS = 1_000_000
"""The largest steps × nodes × types held as one array (8 MB): beyond it, building the
array and copying it at each new step cost more than the sparse representation's
per-node work (5,000 nodes with 4,000 running jobs: 60 million cells)."""


def make_profile(now: int, free: FreeCapacity, releases: list[Release]) -> Profile:
    """The profile of ``free`` now and ``releases`` later."""
    steps = len({end for end, _, _ in releases if end > now}) + 1
    if steps * len(free.capacity_total) * max(1, free.node_count) <= DENSE_CELLS:
        return DenseProfile(now, free, releases)
    return SparseProfile(now, free, releases)
