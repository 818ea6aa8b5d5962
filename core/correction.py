"""Walltime-correction policies: when and how far to extend a limit.

When a running job gets within ``lead`` seconds of its current limit, the dispatcher may
ask the workload manager to extend it, so tight (predicted) limits need not kill jobs.
Policies:

* ``off``: never extend.
* ``simple`` (COARE): add a fixed ``step`` (default 1 h) each time.
* ``power`` (EASY++, Tsafrir et al. 2007, as quoted by the COARE study): the j-th
  walltime value adds ``15 min * 2^(j-2)`` for ``j = 2, 3, ...``. We read ``j = 1`` as the
  initial limit (the request or prediction), which is why the formula starts at 2: the
  first extension is ``j = 2`` and adds 15 min, then 30 min, 1 h, 2 h... The limits are
  ``L, L+15m, L+45m, L+1h45m, ...``. ``base`` (default 900 s) is the first step.

Every policy is capped by ``cap`` (e.g. the partition's maximum run time; None = no cap)
and never shortens a limit. Everything here is a pure function of its arguments: the
caller supplies the clock reading ``now`` and counts the extensions it has made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from cpsched.errors import ConfigError, UnknownPolicyError

Kind = Literal["off", "simple", "power"]
KINDS: tuple[str, ...] = get_args(Kind)


@dataclass(frozen=True, slots=True)
class CorrectionPolicy:
    kind: Kind = "off"
    step: int = 3600
    """Seconds each ``simple`` extension adds."""
    base: int = 900
    """Seconds the first ``power`` extension adds; each later one doubles it."""
    lead: int = 60
    """Extend when a job is this many seconds (or fewer) from its current limit."""
    cap: int | None = None
    """Hard maximum limit in seconds; None = no cap."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UnknownPolicyError("walltime correction", self.kind, KINDS)
        if self.step < 1 or self.base < 1:
            raise ConfigError(
                f"correction step and base must be >= 1 s, got {self.step} and {self.base}"
            )
        if self.lead < 0:
            raise ConfigError(f"correction lead must be >= 0 s, got {self.lead}")
        if self.cap is not None and self.cap < 1:
            raise ConfigError(f"correction cap must be >= 1 s or None, got {self.cap}")

    def increment(self, extensions_so_far: int) -> int:
        """Seconds the next extension adds before capping (0 when ``off``)."""
        if self.kind == "simple":
            return self.step
        if self.kind == "power":
            # Extension number k = extensions_so_far + 1 is walltime value j = k + 1.
            return self.base << extensions_so_far
        return 0

    def next_limit(self, current_limit: int, extensions_so_far: int) -> int | None:
        """The extended limit, or None when the policy is off or the limit is at the cap."""
        if extensions_so_far < 0:
            raise ValueError(f"extensions_so_far must be >= 0, got {extensions_so_far}")
        if self.kind == "off":
            return None
        if self.cap is not None and current_limit >= self.cap:
            return None
        new = current_limit + self.increment(extensions_so_far)
        if self.cap is not None:
            new = min(new, self.cap)
        return new

    def due(self, start: int, current_limit: int, now: int) -> bool:
        """Whether a job started at ``start`` has come within ``lead`` of its limit.

        Always False under ``off``: nothing is ever due when nothing will be extended.
        """
        return self.kind != "off" and now >= start + current_limit - self.lead


def correction_policy(kind: str, **options: int | None) -> CorrectionPolicy:
    """A policy by name; an unknown name is an UnknownPolicyError listing the valid ones."""
    if kind not in KINDS:
        raise UnknownPolicyError("walltime correction", kind, KINDS)
    return CorrectionPolicy(kind, **options)  # type: ignore[arg-type]


def limit_sequence(policy: CorrectionPolicy, initial: int, count: int) -> list[int]:
    """``initial`` followed by up to ``count`` successive extended limits."""
    limits = [initial]
    for done in range(count):
        new = policy.next_limit(limits[-1], done)
        if new is None:
            break
        limits.append(new)
    return limits
