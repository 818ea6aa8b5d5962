"""Check that the service reproduces a replay: the same trace, policy and jobs replayed
in process and over HTTP against a fresh local ``cpsched serve`` (SQLite) must decide the
same (:mod:`cpsched.replay.agreement`: every job's start and end and the metrics derived
from them; counters of calls that ran out of time are reported, not compared). A site runs
it before trusting a deployment; ``./dev run`` runs it on KTH.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

from cpsched.cli.local_service import local_service
from cpsched.replay.agreement import Agreement, compare_replays
from cpsched.replay.compare_table import DEFAULT_KEYS, comparison_rows, to_markdown
from cpsched.replay.metrics import TIMING_KEYS
from cpsched.replay.runner import ReplaySettings, run_replay

TOKEN = "http-check-token"


@dataclass(frozen=True, slots=True)
class HttpCheck:
    agreement: Agreement
    table: str
    http_seconds: float
    in_process_seconds: float


def _metrics(path: Path) -> dict[str, object]:
    summary = json.loads((path / "summary.json").read_text())
    summary.pop("settings", None)
    return summary


def http_check(settings: ReplaySettings) -> HttpCheck:
    """Replay ``settings`` in process, then over HTTP against a local service configured
    with the same policy, and compare what the two decided."""
    in_process = replace(settings, out=settings.out / "in-process", timings=False)
    began = time.perf_counter()
    run_replay(in_process)
    local_s = time.perf_counter() - began
    # The service gets the same policy (a TOML table has no None: unset keys keep defaults),
    # its CP searches limited by the same work as the replay's (within its deadline).
    chosen = settings.policy
    if chosen.is_cp and chosen.cp_replay_search == "work":
        chosen = chosen.but(cp_deterministic=True)
    policy = chosen.model_dump(exclude_none=True)
    with local_service(settings.out / "service", token=TOKEN, **policy) as service:
        over_http = replace(
            settings,
            out=settings.out / "over-http",
            timings=False,
            service=service.url,
            token=TOKEN,
            cluster="http-check",
        )
        began = time.perf_counter()
        run_replay(over_http)
        http_s = time.perf_counter() - began
    local, remote = _metrics(in_process.out), _metrics(over_http.out)
    agreement = compare_replays(in_process.out, over_http.out)
    rows = comparison_rows(
        {"in-process": local, "over-http": remote},
        baseline="in-process",
        keys=[k for k in DEFAULT_KEYS if not k.startswith(TIMING_KEYS)],
    )
    return HttpCheck(agreement, to_markdown(rows), http_s, local_s)
