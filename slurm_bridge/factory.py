"""Build the backend and the service client from settings (only entry points call this)."""

from __future__ import annotations

from cpsched.slurm_bridge.backend import WorkloadManager
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.pbs import PbsBackend
from cpsched.slurm_bridge.runner import Runner, SubprocessRunner
from cpsched.slurm_bridge.slurm_backend import SlurmBackend
from cpsched.slurm_bridge.slurm_rest import SlurmRestClient
from cpsched.wire.client import ServiceClient


def make_backend(settings: BridgeSettings, runner: Runner | None = None) -> WorkloadManager:
    runner = runner or SubprocessRunner(timeout_s=settings.command_timeout_s)
    if settings.backend == "pbs":
        return PbsBackend(
            runner=runner,
            tag=settings.hold_tag,
            queues=settings.partitions,
            unlimited_s=settings.unlimited_time_limit_s,
        )
    rest = None
    if settings.state_source == "rest":
        rest = SlurmRestClient(
            socket=settings.slurmrestd_socket,
            base_url=settings.slurmrestd_url,
            timeout_s=settings.command_timeout_s,
        )
    return SlurmBackend(
        runner=runner,
        tag=settings.hold_tag,
        partitions=settings.partitions,
        source=settings.state_source,
        finished_source=settings.finished_source,
        unlimited_s=settings.unlimited_time_limit_s,
        bin_dir=settings.slurm_bin_dir,
        rest=rest,
        splits_tasks=settings.split_pin == "node_list",
    )


def make_client(settings: BridgeSettings) -> ServiceClient:
    return ServiceClient(
        settings.service_url, settings.token, settings.cluster, timeout_s=settings.deadline_s
    )
