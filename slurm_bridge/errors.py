"""Typed errors of the bridge.

Hierarchy::

    CpschedError (cpsched.errors)
    └── BridgeError                 base of everything the bridge raises on purpose
        ├── BridgeConfigError       the bridge's TOML / environment settings are wrong
        ├── CommandError            a workload-manager command failed or timed out
        │   └── SplitPinRefused     Slurm takes no per-node core counts (23.11 and later)
        ├── StateParseError         a command's output cannot be understood
        └── StateFileError          the bookkeeping file cannot be read or written

The service's own failures are the wire client's :class:`~cpsched.wire.errors.ServiceError`
(unavailable or rejected). Each message says what went wrong and what to do about it.
Only the CLI turns these into exit codes; the loop turns every ServiceError (a refusal too:
a rotated token must not stall the cluster) into the configured fallback.
"""

from __future__ import annotations

from collections.abc import Sequence

from cpsched.errors import CpschedError


class BridgeError(CpschedError):
    """Base class of every error the bridge raises on purpose."""


class BridgeConfigError(BridgeError):
    """A bridge setting is invalid or missing."""


class CommandError(BridgeError):
    """A workload-manager command exited non-zero, timed out or is missing."""

    def __init__(self, argv: Sequence[str], reason: str, stderr: str = "") -> None:
        self.argv = list(argv)
        self.reason = reason
        self.stderr = stderr.strip()
        detail = f": {self.stderr[:300]}" if self.stderr else ""
        super().__init__(
            f"{argv[0] if argv else '?'} failed ({reason}){detail}; "
            f"check that the command works for the bridge's user: {' '.join(self.argv)!r}"
        )


class SplitPinRefused(CommandError):
    """Slurm refused a pin reservation's per-node core counts (``CoreCnt=2,3``): newer
    Slurm (24.11 on the test bed) takes only a total, so a decided split cannot be pinned;
    the bridge then starts task jobs on Slurm's own split (``split_pin = "node_list"``)."""


class StateParseError(BridgeError):
    """Output of squeue/sinfo/sacct/qstat could not be parsed."""


class StateFileError(BridgeError):
    """The bridge's state file cannot be read or written."""
