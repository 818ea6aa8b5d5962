"""The dashboard at a site's scale, in a real browser: a service driven by a replay of
3,000 KTH jobs over HTTP (cluster ``kth``, the default policy) and a queue of 5,000 jobs
on 512 nodes (cluster ``site``, :func:`scenario.big_queue`). The queue is sorted, filtered
and paged over all 5,000 jobs, a job found by id says why it waits as the API does, and a
decision reads in words; a replayed job lists the decision that started it.

The screenshots docs/operator-views.md shows (``ui-queue-5000.png``, ``ui-job-5000.png``,
``ui-decision-5000.png``, ``ui-job-decisions.png``) come from
``CPSCHED_SCREENSHOTS=docs/img pytest tests/service/ui/test_browser_at_scale.py``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as loaded
from selenium.webdriver.support.wait import WebDriverWait

from cpsched.cli.local_service import LocalService, free_port
from cpsched.runtime.policy import Policy
from tests.service.ui import scenario
from tests.service.ui.browsing import WAIT_S, console_problems, sign_in, texts, visit
from tests.service.ui.conftest import KTH, READER, WRITER, replay_kth

pytestmark = pytest.mark.slow

REPLAY_JOBS = 3000
PAGE_S = 5.0
"""The longest a page may take to load here (a shared, loaded machine; about 0.5 s idle)."""


@dataclass(frozen=True)
class ScaleService:
    url: str
    decision_id: int
    head_job: str
    """The queued job cpsched may start that has waited longest."""
    oldest_job: str
    """The queued job that has waited longest (it may be held back)."""


def _config(root: Path) -> Path:
    path = root / "cpsched.toml"
    path.write_text(
        f'database_url = "sqlite:///{root}/cpsched.db"\n'
        "upgrade_on_start = true\n"
        f'[[tokens]]\nname = "bridge"\nsecret = "{WRITER}"\n'
        f'[[tokens]]\nname = "operator"\nsecret = "{READER}"\nread_only = true\n'
        # The default policy (HCP3, last-two), with a deadline a loaded machine keeps.
        "[defaults]\ndeadline = 2.0\n"
    )
    return path


@pytest.fixture(scope="module")
def at_scale(tmp_path_factory: pytest.TempPathFactory, traces_dir: Path) -> Iterator[ScaleService]:
    root = tmp_path_factory.mktemp("ui-at-scale")
    service = LocalService(_config(root), free_port(), root / "service.log")
    service.start()
    try:
        replay_kth(service, traces_dir / KTH, root / "replay", REPLAY_JOBS, Policy(deadline=2.0))
        body = scenario.big_queue(10_000_000)
        waiting = [j for j in body["queued"] if j.get("eligible", True)]
        head = min(waiting, key=lambda j: j["submit"])["id"]
        headers = {"Authorization": f"Bearer {WRITER}"}
        with httpx.Client(base_url=service.url, headers=headers, timeout=120) as client:
            answer = client.post("/v1/clusters/site/dispatch", json=body)
            answer.raise_for_status()
        oldest = body["queued"][0]["id"]  # in submit order
        yield ScaleService(service.url, answer.json()["decision_id"], head, oldest)
    finally:
        service.stop()


@pytest.fixture(scope="module")
def signed_in(browser: Any, at_scale: ScaleService) -> Any:
    sign_in(browser, f"{at_scale.url}/ui/clusters/site", READER)
    return browser


def _loaded_in_time(driver: Any, url: str) -> None:
    began = time.perf_counter()
    driver.get(url)
    took = time.perf_counter() - began
    assert took < PAGE_S, f"{url} took {took:.1f} s"
    assert console_problems(driver) == []


def test_the_replay_reached_the_service(at_scale):
    audit = httpx.get(
        f"{at_scale.url}/v1/clusters/kth/decisions",
        params={"limit": 1},
        headers={"Authorization": f"Bearer {READER}"},
    ).json()
    assert audit["entries"]  # the replay's decisions, audited
    metrics = httpx.get(f"{at_scale.url}/metrics").text
    assert re.search(r'cpsched_queued_jobs\{cluster="site"\} 5000', metrics)
    assert 'cpsched_utilisation_ratio{cluster="site",resource="cpu"}' in metrics


def test_the_queue_sorts_filters_and_pages_over_5000_jobs(signed_in, at_scale, screenshots):
    queue = f"{at_scale.url}/ui/clusters/site"
    _loaded_in_time(signed_in, queue)
    assert "page 1 of 10" in texts(signed_in, "#queue-pages")[0]
    # The longest wait first, over the whole queue: the head job heads page 1.
    signed_in.find_element(By.CSS_SELECTOR, "#queue-table thead a[href*='sort=wait']").click()
    WebDriverWait(signed_in, WAIT_S).until(loaded.url_contains("sort=wait"))
    assert console_problems(signed_in) == []
    rows = texts(signed_in, "#queue-table tbody th.job")
    assert len(rows) == 500
    assert rows[0] == at_scale.oldest_job
    # One user's jobs in one QOS, through the form; the order is kept.
    signed_in.find_element(By.ID, "filter-user").send_keys("user07")
    signed_in.find_element(By.ID, "filter-qos").send_keys("high")
    signed_in.find_element(By.CSS_SELECTOR, "#queue-filter button[type=submit]").click()
    WebDriverWait(signed_in, WAIT_S).until(loaded.url_contains("user=user07"))
    assert console_problems(signed_in) == []
    cells = texts(signed_in, "#queue-table tbody tr")
    assert cells and all(" user07 " in f" {c} " and " high " in f" {c} " for c in cells)
    caption = texts(signed_in, "#queue-table caption")[0]
    assert re.match(r"\d+ of the 5000 queued jobs, by wait, largest first", caption)
    visit(signed_in, f"{queue}?sort=wait", screenshots, "queue-5000", at="#queue-h")


def test_the_head_job_is_found_and_says_why_it_waits_as_the_api_does(
    signed_in, at_scale, screenshots
):
    signed_in.get(f"{at_scale.url}/ui/clusters/site")
    box = signed_in.find_element(By.ID, "find-job")
    box.send_keys(at_scale.head_job)
    box.submit()
    WebDriverWait(signed_in, WAIT_S).until(
        loaded.url_matches(rf"/ui/clusters/site/jobs/{at_scale.head_job}$")
    )
    assert console_problems(signed_in) == []
    shown = " ".join(texts(signed_in, "#job-why li"))
    api = httpx.get(
        f"{at_scale.url}/v1/clusters/site/jobs/{at_scale.head_job}",
        headers={"Authorization": f"Bearer {READER}"},
    ).json()
    assert api["state"] == "queued"
    for name, amount in api["pending"]["waits_for"].items():
        assert f"{name} {amount}" in shown  # the API's figures, word for word
    for rule in api["pending"]["rules"]:
        assert rule in shown
    visit(signed_in, signed_in.current_url, screenshots, "job-5000")


def test_the_decision_on_5000_jobs_reads_in_words(signed_in, at_scale, screenshots):
    url = f"{at_scale.url}/ui/clusters/site/decisions/{at_scale.decision_id}"
    _loaded_in_time(signed_in, url)
    summary = texts(signed_in, "#decision-summary")[0]
    assert "5000 queued" in summary.replace(",", "")
    assert signed_in.find_elements(By.CSS_SELECTOR, "#decision-notes li")
    visit(signed_in, url, screenshots, "decision-5000")


def test_a_replayed_job_lists_the_decision_that_started_it(signed_in, at_scale, screenshots):
    headers = {"Authorization": f"Bearer {READER}"}
    audit = httpx.get(
        f"{at_scale.url}/v1/clusters/kth/decisions", params={"limit": 50}, headers=headers
    ).json()
    started = next(e for e in audit["entries"] if e["starts"])
    job_id = started["starts"][0]["job_id"]
    api = httpx.get(f"{at_scale.url}/v1/clusters/kth/jobs/{job_id}", headers=headers).json()
    assert [d["decision_id"] for d in api["decisions"]] == [started["id"]]
    _loaded_in_time(signed_in, f"{at_scale.url}/ui/clusters/kth/jobs/{job_id}")
    listed = texts(signed_in, "#job-decisions li")
    assert listed == [f"decision #{started['id']} at {listed[0].split(' at ')[1]}"]
    assert listed[0].endswith(": started it")
    visit(signed_in, signed_in.current_url, screenshots, "job-decisions")
    signed_in.find_element(By.CSS_SELECTOR, "#job-decisions a").click()
    WebDriverWait(signed_in, WAIT_S).until(
        loaded.url_matches(rf"/ui/clusters/kth/decisions/{started['id']}$")
    )
    assert job_id in signed_in.page_source  # the decision lists the job it started
