"""The CP search's defaults: the product's, in one place.

:class:`cpsched.core.cp.SearchConfig` and :class:`cpsched.runtime.policy.Policy` both read
them, so ``make_dispatcher("hcp3", ...)`` searches as the service and the replay do. Kept
apart from ``core.cp`` so that the policy can name them without loading OR-Tools.
"""

from __future__ import annotations

DEADLINE_S = 0.2
"""Seconds per call: short enough for a scheduler woken on every event (the service counts
its own work in it; a replay gives it all to the dispatcher)."""

FIRST_RESTART_S = 0.02
"""The first restart's limit (the papers' δ is 1 s, for 2 s deadlines)."""

RESTART_GROWTH_CAP = 16
"""Restart limits double up to this many times the first (the papers' δ_max = 16 δ)."""

PATIENCE = 1
"""Restarts without improvement before the search stops (the papers' k is 2)."""

WORK_PER_SECOND = 0.15
"""CP-SAT deterministic time an ordinary core does in a second on the dispatch models:
about 6-7 s of wall time per unit on HCP3's KTH models on a 2-core machine
(docs/results/cp-dispatchers.md). A search limited by work gets ``deadline × WORK_PER_SECOND``
for all its runs of one call, so that a call stays within the deadline on such a core."""

FIRST_RESTART_WORK = round(FIRST_RESTART_S * WORK_PER_SECOND, 6)
"""The first restart's limit of a search limited by work (replays), in CP-SAT's
deterministic time: the service's first restart (:data:`FIRST_RESTART_S`) in the work an
ordinary core does in it, 0.003 units, doubling as the seconds do, within the call's work
budget (docs/results/cp-dispatchers.md, "The first restart's work")."""
