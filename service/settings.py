"""Service configuration: a TOML file plus ``CPSCHED_*`` environment variables.

Environment variables win over the file (``CPSCHED_DATABASE_URL``,
``CPSCHED_UPGRADE_ON_START``, ``CPSCHED_TOKENS`` as JSON...), so a container can keep
its secrets out of the file. Every option and its default is listed in the README.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from cpsched.errors import ConfigError
from cpsched.runtime.policy import Policy, explain


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TokenConfig(StrictModel):
    name: str = Field(min_length=1)
    secret: SecretStr
    clusters: list[str] = Field(default_factory=lambda: ["*"])
    """Clusters this token has rights to; ``*`` is every cluster."""
    read_only: bool = False
    """Read rights only: the audit trail, job information and the dashboard, never a
    dispatch or a finished job (give operators this one, the bridge the other)."""

    @model_validator(mode="after")
    def _long_enough(self) -> TokenConfig:
        if len(self.secret.get_secret_value()) < 8:
            raise ValueError(f"token {self.name!r}: the secret must be at least 8 characters")
        return self

    def allows(self, cluster: str) -> bool:
        return "*" in self.clusters or cluster in self.clusters


class RetentionSettings(StrictModel):
    """How long each kind of history is kept, in days of the cluster's own clock (0: for
    ever); see :mod:`cpsched.service.store.retention`."""

    audit_days: float = Field(30, ge=0)
    """The audit trail (one row per dispatch answer)."""
    predictions_days: float = Field(30, ge=0)
    """Predictions made (queued and at start), with the real run time once known."""
    finished_days: float = Field(365, ge=0)
    """Finished jobs; what the cluster's predictor learns from on a restart is kept."""
    interval_s: float = Field(600, gt=0)
    """Time between two passes (the first runs a minute after the start)."""
    batch_rows: int = Field(2000, ge=1, le=100_000)
    """Rows deleted per transaction: short ones, so that no dispatch waits long."""

    def keep_days(self) -> dict[str, float | None]:
        """Days kept per kind (table name), None for ever."""
        days = {
            "decisions": self.audit_days,
            "predictions": self.predictions_days,
            "finished_jobs": self.finished_days,
        }
        return {kind: kept or None for kind, kept in days.items()}


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CPSCHED_", extra="forbid")

    database_url: str = "sqlite:///cpsched.db"
    upgrade_on_start: bool = False
    """Apply pending migrations at start; otherwise an out-of-date schema stops the start."""
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    tokens: list[TokenConfig] = Field(default_factory=list)
    defaults: Policy = Field(default_factory=Policy)
    """The policy of every cluster that has no ``[clusters.NAME]`` table."""
    clusters: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-cluster overrides of ``defaults`` (validated by :meth:`policy`)."""
    audit_snapshots: bool = False
    """Keep each dispatched snapshot in the audit trail, not only its digest (large)."""
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    writer_lease_s: float = Field(60.0, ge=0)
    """A bridge's hold on its cluster's dispatches (:mod:`cpsched.service.lease`): another
    bridge is refused until the holder has not dispatched for this long (0: no check)."""
    log_level: str = "WARNING"
    metrics_token: SecretStr | None = None
    """When set, ``/metrics`` answers only requests bearing this token (Prometheus:
    ``authorization`` in the scrape config): it names every cluster; unset, it is open."""
    malloc_mmap_threshold_kib: int = Field(128, ge=0)
    """Blocks from this size on are mapped and given back when freed (glibc only; 0: glibc's
    moving threshold, under which RSS creeps up call after call): :mod:`cpsched.service.malloc`."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file's values arrive as init arguments; the environment overrides them.
        return env_settings, init_settings

    @model_validator(mode="after")
    def _check_clusters(self) -> ServiceSettings:
        for name in self.clusters:
            self.policy(name)
        names = [t.name for t in self.tokens]
        if len(set(names)) != len(names):
            raise ValueError("token names must be unique")
        return self

    def policy(self, cluster: str) -> Policy:
        """The cluster's policy: ``[defaults]`` with the cluster's own table over it, or
        the named policy its table gives (``policy = "easy++"``) with the table over that."""
        overrides = self.clusters.get(cluster, {})
        base = {} if "policy" in overrides else self.defaults.model_dump()
        try:
            return Policy.model_validate({**base, **overrides})
        except ValidationError as exc:
            raise ValueError(f"[clusters.{cluster}]: {explain(exc)}") from None


def load_settings(path: Path | None = None, **overrides: Any) -> ServiceSettings:
    """Settings from ``path`` (TOML), the environment and ``overrides`` (command line)."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return ServiceSettings(**data)
    except ValidationError as exc:
        where = f"config {path}" if path else "configuration"
        raise ConfigError(f"{where}: {explain(exc)}") from None
