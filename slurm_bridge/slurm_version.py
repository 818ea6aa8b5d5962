"""Slurm's version, learned once from ``scontrol --version``, and what follows from it.

Upstream prints ``slurm 24.11.5``; Debian's packages print ``slurm-wlm 24.11.5``. The
readers need the version for two things: which commands give the state as JSON (22.05's
``sinfo --json`` lists nodes; from 23.02 on, Slurm prints JSON through its data_parser
plugins, and ``scontrol --json show nodes`` lists them), and which data_parser to ask
for (``JSON_FORMATS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cpsched.slurm_bridge.errors import StateParseError

_VERSION = re.compile(r"^\s*slurm\S*\s+(\d+)\.(\d+)\.(\d+)", re.IGNORECASE)

JSON_FORMATS = (("v0.0.40", (23, 11)), ("v0.0.41", (24, 5)), ("v0.0.42", (24, 11)))
"""The data_parser versions the JSON readers read, with the first Slurm release that has
each (Slurm's own source: 23.11 has v0.0.39-40, 24.05 v0.0.39-41, 24.11 v0.0.40-42,
25.05 v0.0.40-43, 25.11 v0.0.41-44). Slurm 22.05 prints openapi v0.0.38 and cannot be
asked for another; 23.02 has only v0.0.39, which no reader here reads."""


@dataclass(frozen=True, slots=True, order=True)
class SlurmVersion:
    major: int
    minor: int
    micro: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"

    def at_least(self, major: int, minor: int) -> bool:
        return (self.major, self.minor) >= (major, minor)

    @property
    def has_data_parser(self) -> bool:
        """Whether Slurm prints JSON through data_parser plugins (23.02 on: ``--json=<v>``
        chooses one, ``scontrol`` has ``--json``); 22.05 prints openapi v0.0.38 only."""
        return self.at_least(23, 2)

    @property
    def json_format(self) -> str:
        """The data_parser the JSON source asks for (``--json=<it>``): the newest one the
        readers read that this Slurm has. StateParseError before 23.11 (23.02's v0.0.39 is
        not read; 22.05 takes no choice, see ``has_data_parser``)."""
        usable = [name for name, since in JSON_FORMATS if self.at_least(*since)]
        if not usable:
            raise StateParseError(
                f"Slurm {self}: its JSON (data_parser v0.0.39) is not one the bridge reads "
                f"(openapi v0.0.38 of Slurm 22.05, data_parser v0.0.40-v0.0.42 of Slurm "
                f'23.11-24.11): set state_source = "text"'
            )
        return usable[-1]


def parse_version(text: str, command: str) -> SlurmVersion:
    """``scontrol --version``'s output (``slurm 24.11.5``) → its version; a clear error
    naming ``command`` for anything else."""
    match = _VERSION.match(text)
    if match is None:
        raise StateParseError(
            f"cannot read Slurm's version from `{command}`: it printed {text.strip()[:80]!r}, "
            "not 'slurm X.Y.Z'"
        )
    major, minor, micro = (int(part) for part in match.groups())
    return SlurmVersion(major, minor, micro)
