"""Bridge settings: a TOML file, overridden by ``CPSCHED_BRIDGE_*`` environment variables.

Only the CLI loads settings; every other module receives the values it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from cpsched.slurm_bridge.errors import BridgeConfigError

Mode = Literal["active", "shadow"]
Fallback = Literal["hold", "release"]
Backend = Literal["slurm", "pbs"]
StateSource = Literal["json", "text", "rest"]
FinishedSource = Literal["auto", "jobcomp", "sacct", "squeue"]
SplitPin = Literal["reservation", "node_list"]


class BridgeSettings(BaseSettings):
    """Everything the bridge needs to know; see ``slurm_bridge/kit/bridge.toml``."""

    model_config = SettingsConfigDict(env_prefix="CPSCHED_BRIDGE_", extra="forbid")

    service_url: str = Field("http://127.0.0.1:8000", description="Base URL of cpsched serve.")
    token: str = Field("", description="Bearer token the service knows (name 'bridge').")
    cluster: str = Field(..., min_length=1, description="Cluster name in the service's API.")
    mode: Mode = "active"
    fallback: Fallback = Field(
        "hold",
        description="When the service is unreachable or late: 'hold' keeps held jobs held; "
        "'release' hands them back to Slurm's own scheduler until the service returns.",
    )
    refused: Fallback = Field(
        "release",
        description="A held job the service refuses (no node could ever run it as it reads "
        "the job: a resource type no node has, more nodes than its rules allow, a shape "
        "cpsched models more strictly than the workload manager): 'release' hands it to the "
        "workload manager's own scheduler, once, so that it never waits for no one; 'hold' "
        "keeps it held. Either way the reason is in the audit log.",
    )
    fallback_after_s: float = Field(
        0.0, ge=0, description="Apply the fallback only after the service failed this long."
    )
    poll_interval_s: float = Field(
        10.0, gt=0, description="Cycle at least this often (events start cycles sooner)."
    )
    min_cycle_gap_s: float = Field(
        1.0,
        ge=0,
        description="Never start cycles closer than this: bounds the squeue/sinfo load.",
    )
    probe_interval_s: float = Field(
        1.0, gt=0, description="During an outage, probe the service's /healthz this often."
    )
    wake_file: Path | None = Field(
        None,
        description="Touched by job_submit.lua and EpilogSlurmctld on submissions and job "
        "ends: a change starts a cycle (default: 'wake' beside the state file).",
    )
    deadline_s: float = Field(5.0, gt=0, description="HTTP timeout of one service call.")
    command_timeout_s: float = Field(30.0, gt=0, description="Timeout of one Slurm command.")
    backoff_max_s: float = Field(300.0, gt=0, description="Ceiling of the retry backoff.")
    hold_tag: str = Field(
        "extsched",
        min_length=1,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="AdminComment that job_submit.lua puts on jobs held for cpsched.",
    )
    partitions: list[str] = Field(
        default_factory=list, description="Only these partitions (empty: all)."
    )
    state_file: Path = Path("/var/lib/cpsched-bridge/state.json")
    metrics_file: Path | None = Field(
        None, description="Prometheus textfile (node_exporter textfile collector)."
    )
    backend: Backend = "slurm"
    state_source: StateSource = "json"
    finished_source: FinishedSource = "auto"
    finished_read_s: float = Field(
        60.0,
        ge=0,
        description="How often the record of ended jobs (finished_source) is read: sacct "
        "over two days takes seconds at a busy site (2.2 s for a 100,000-line jobcomp "
        "file). Between reads the ended jobs squeue -t all lists (MinJobAge, 300 s by "
        "default) are posted; keep this below MinJobAge.",
    )
    slurmrestd_socket: Path | None = None
    slurmrestd_url: str = "http://localhost"
    slurm_bin_dir: Path | None = Field(
        None, description="Directory of squeue/sinfo/scontrol/sacct (default: PATH)."
    )
    unlimited_time_limit_s: int = Field(
        7 * 86400,
        gt=0,
        description="Limit given to jobs whose limit and partition maximum are UNLIMITED.",
    )
    pin_grace_s: float = Field(
        30.0, ge=0, description="A released job still pending after this is re-held."
    )
    split_pin: SplitPin = Field(
        "reservation",
        description="How a task job (sbatch -n) started on several nodes gets exactly its "
        "decided CPUs on each: 'reservation' puts it in a core reservation of those CPUs "
        "(made at its release, removed once it runs; needs Operator), 'node_list' only pins "
        "its nodes, so that only Slurm's own split can be decided and a job whose split "
        "another job's end could change waits for a steady moment (split_drift_wait_s).",
    )
    split_drift_wait_s: float = Field(
        30.0,
        ge=0,
        description="How long a task job spread over several nodes that Slurm splits itself "
        "(every one with split_pin = 'node_list'; with 'reservation' those in a site "
        "reservation or on whole nodes) waits for a moment when no running job's end can "
        "change that split; then it starts anyway.",
    )
    shadow_log: Path | None = Field(
        None, description="JSON-lines record of shadow decisions (default: beside state)."
    )
    audit_log: Path | None = Field(
        None,
        description="JSON-lines audit of every start, refusal, re-hold, mismatch and "
        "fallback (default: audit.jsonl beside the state file).",
    )

    @field_validator("service_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @property
    def shadow_log_path(self) -> Path:
        return self.shadow_log or self.state_file.with_name("shadow.jsonl")

    @property
    def wake_file_path(self) -> Path:
        return self.wake_file or self.state_file.with_name("wake")

    @property
    def audit_log_path(self) -> Path:
        return self.audit_log or self.state_file.with_name("audit.jsonl")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment beats the file so a systemd drop-in can override one value.
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


def load_settings(path: Path | None, **overrides: Any) -> BridgeSettings:
    """Settings from ``path`` (TOML) and the environment; typed error if invalid."""
    if path is not None and not path.is_file():
        raise BridgeConfigError(f"bridge config {path} not found; pass --config FILE")

    class _FromFile(BridgeSettings):
        model_config = SettingsConfigDict(toml_file=path) if path else SettingsConfigDict()

    try:
        loaded = _FromFile(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise BridgeConfigError(
            f"invalid bridge settings ({problems}); fix {path or 'the environment'}"
        ) from None
    return BridgeSettings.model_validate(loaded.model_dump())
