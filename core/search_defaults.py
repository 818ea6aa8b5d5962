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

FIRST_RESTART_WORK = 0.02
"""The first restart's limit of a search limited by work (replays), in CP-SAT's
deterministic time: chosen so that a call stays within :data:`DEADLINE_S` on an ordinary
core (measured in docs/cp-dispatchers.md)."""
