"""Fixtures of the dashboard's browser tests: Debian's headless chromium driven by
Selenium through Debian's chromedriver (nothing is downloaded), and a real
``cpsched serve`` fed by a short replay over HTTP.

``./dev test`` installs the ``chromium`` and ``chromium-driver`` packages when it runs as
root; without them these tests fail when ``CI`` is set and are skipped otherwise.
Screenshots go to ``$CPSCHED_SCREENSHOTS`` (``./dev test`` sets ``out/screenshots``),
else to a directory under pytest's temporary root.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cpsched.cli.local_service import LocalService, free_port
from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.runtime.policy import Policy
from tests.service.ui import scenario

WRITER = "bridge-token-0123"
READER = "operator-token-0123"
KTH = "KTH-SP2-1996-2.1-cln.swf.gz"
REPLAY_JOBS = 300
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1440,900",
)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the browser tests need it in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("CPSCHED_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (Path(chromium).exists() and Path(driver_path).exists()):
        _unavailable(
            "Debian's chromium and chromium-driver are not installed "
            "(./dev test installs them as root: apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # Both paths given: Selenium Manager has nothing to look up, and must not download.
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@dataclass(frozen=True)
class FedService:
    url: str
    live_time: int
    burst_answer: dict


def _config(path: Path, root: Path) -> Path:
    path.write_text(
        f'database_url = "sqlite:///{root}/cpsched.db"\n'
        "upgrade_on_start = true\n"
        f'[[tokens]]\nname = "bridge"\nsecret = "{WRITER}"\n'
        f'[[tokens]]\nname = "operator"\nsecret = "{READER}"\nread_only = true\n'
        # PCP3: solves KTH's windows in time, and refuses the burst's model (too large).
        # A deadline no busy machine misses: the model's size alone makes the fallback.
        '[defaults]\ndispatcher = "pcp3"\npredictor = "last-two"\ndeadline = 5.0\n'
        '[clusters.shadow]\ndispatcher = "easy"\n'
    )
    return path


def replay_kth(service: LocalService, trace: Path, out: Path, jobs: int, policy: Policy) -> None:
    """The first ``jobs`` of ``trace`` replayed into ``service`` over HTTP as cluster
    ``kth``, which stays (the pages show what the replay left)."""
    run_replay(
        ReplaySettings(
            trace=trace,
            out=out,
            jobs=jobs,
            plots=False,
            timings=False,
            policy=policy,
            service=service.url,
            token=WRITER,
            cluster="kth",
            keep_cluster=True,
        )
    )


@pytest.fixture(scope="module")
def fed_service(tmp_path_factory: pytest.TempPathFactory, traces_dir: Path) -> Iterator[FedService]:
    """A real service: 300 KTH jobs replayed over HTTP into cluster ``kth``, then a
    burst the fallback answers, then a live snapshot; and a cluster in shadow mode."""
    root = tmp_path_factory.mktemp("ui-service")
    service = LocalService(_config(root / "cpsched.toml", root), free_port(), root / "service.log")
    service.start()
    try:
        replay_kth(
            service, traces_dir / KTH, root / "replay", REPLAY_JOBS, Policy(dispatcher="pcp3")
        )
        headers = {"Authorization": f"Bearer {WRITER}"}
        with httpx.Client(base_url=service.url, headers=headers, timeout=60) as client:
            audit = client.get("/v1/clusters/kth/decisions", params={"limit": 1000}).json()
            t = max(entry["time"] for entry in audit["entries"]) + 600
            burst = client.post("/v1/clusters/kth/dispatch", json=scenario.burst(t - 300))
            burst.raise_for_status()
            client.post("/v1/clusters/kth/dispatch", json=scenario.live(t)).raise_for_status()
            dry_runs, finished = scenario.shadow()
            for body in dry_runs:
                client.post("/v1/clusters/shadow/dispatch", json=body).raise_for_status()
            done = client.post("/v1/clusters/shadow/jobs/finished", json={"jobs": finished})
            done.raise_for_status()
        yield FedService(service.url, t, burst.json())
    finally:
        service.stop()
