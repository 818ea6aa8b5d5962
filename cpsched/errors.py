"""Typed errors shared by every cpsched component.

Hierarchy::

    CpschedError                    base of everything cpsched raises on purpose
    ├── ConfigError                 a setting or system description is wrong
    │   ├── UnknownPolicyError      a dispatcher/allocator/predictor name is not registered
    │   └── GridError               a sweep's grid file cannot be used (cpsched sweep)
    ├── MissingExtraError           an optional extra is not installed (names the pip command)
    ├── SweepError                  a sweep cannot run (no scheduler, no worker)
    ├── InputError                  caller-supplied data is malformed
    │   ├── TraceError              an SWF trace cannot be used at all
    │   └── SnapshotError           a snapshot is inconsistent (unknown node, over-full node…)
    └── InvalidDecisionError        a decision breaks a capacity or placement rule

Only entry points (CLI, API layer) turn these into exit codes or HTTP statuses; each
message says what was wrong and what to do about it.
"""

from collections.abc import Iterable


class CpschedError(Exception):
    """Base class of every error cpsched raises on purpose."""


class ConfigError(CpschedError):
    """A setting or a system description is invalid."""


class UnknownPolicyError(ConfigError):
    """A policy name is not registered; the message lists the valid ones."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; choose one of: {', '.join(self.valid)}")


class GridError(ConfigError):
    """A sweep grid is wrong: which file, which table, what is wrong, what to write instead."""


class MissingExtraError(CpschedError):
    """A feature needs an optional extra that is not installed; says how to install it."""

    def __init__(self, feature: str, extra: str, module: str | None) -> None:
        self.extra = extra
        super().__init__(
            f"{feature} needs the [{extra}] extra ({module or 'a module'} is not installed): "
            f"pip install 'cpsched[{extra}]'"
        )


class SweepError(CpschedError):
    """A sweep cannot run: the scheduler is unreachable or has no worker."""


class InputError(CpschedError):
    """Caller-supplied data is malformed."""


class TraceError(InputError):
    """An SWF trace cannot be replayed (missing file, no usable machine description…)."""


class SnapshotError(InputError):
    """A snapshot is internally inconsistent."""


class InvalidDecisionError(CpschedError):
    """A decision violates capacity or placement rules; lists every violation."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        shown = "; ".join(violations[:5])
        more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
        super().__init__(f"invalid decision: {shown}{more}")
