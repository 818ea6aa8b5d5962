"""The dashboard in a real browser (Debian's headless chromium), against a real service fed
by a short replay over HTTP: every page loads without a console error, the queue shows
the jobs the service holds, the Gantt chart the running jobs, the log the fallback.

Each page's screenshot is saved (``$CPSCHED_SCREENSHOTS``, see conftest.py); the ones in
docs/img/ come from ``CPSCHED_SCREENSHOTS=docs/img pytest tests/service/ui/test_browser.py``.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as loaded
from selenium.webdriver.support.wait import WebDriverWait

from tests.service.ui import scenario
from tests.service.ui.browsing import WAIT_S, console_problems, sign_in, texts, visit
from tests.service.ui.conftest import READER, FedService


@pytest.fixture(scope="module")
def signed_in(browser: Any, fed_service: FedService) -> Any:
    """The browser, sent to the login form by the dashboard, signed in with a read-only token."""
    sign_in(browser, f"{fed_service.url}/ui/clusters/kth", READER)
    return browser


def test_the_burst_was_answered_by_the_fallback(fed_service):
    diagnostics = fed_service.burst_answer["diagnostics"]
    assert diagnostics["fallback"] is True
    assert diagnostics["fallback_reason"] == "model too large"


def test_queue_and_gantt(signed_in, fed_service, screenshots):
    visit(signed_in, f"{fed_service.url}/ui/clusters/kth", screenshots, "queue-and-plan")
    assert texts(signed_in, "#queue-table tbody th.job") == list(scenario.LIVE_QUEUED)
    bars = signed_in.find_elements("css selector", "#gantt .bar-running, #gantt .bar-overdue")
    running = {bar.get_attribute("data-job") for bar in bars}
    assert running == set(scenario.LIVE_RUNNING)
    # Every bar can take the keyboard focus and says what it is.
    first = bars[0]
    assert first.get_attribute("tabindex") == "0"
    assert first.get_attribute("data-job") in first.get_attribute("aria-label")
    # The plan: jobs starting now and jobs planned later are drawn too.
    starting = {
        b.get_attribute("data-job")
        for b in signed_in.find_elements("css selector", "#gantt .bar-starting")
    }
    planned = {
        b.get_attribute("data-job")
        for b in signed_in.find_elements("css selector", "#gantt .bar-planned")
    }
    assert starting | planned <= set(scenario.LIVE_QUEUED)
    assert starting and planned


def test_a_job_is_searched_by_id_and_its_page_gives_the_apis_reason(
    signed_in, fed_service, screenshots
):
    job_id = scenario.LIVE_QUEUED[-1]  # held back by the workload manager: a dependency
    signed_in.get(f"{fed_service.url}/ui/clusters/kth")
    box = signed_in.find_element(By.ID, "find-job")
    box.send_keys(job_id)
    box.submit()
    WebDriverWait(signed_in, WAIT_S).until(loaded.url_matches(rf"/ui/clusters/kth/jobs/{job_id}$"))
    assert console_problems(signed_in) == []
    shown = texts(signed_in, "#job-why li")
    api = httpx.get(
        f"{fed_service.url}/v1/clusters/kth/jobs/{job_id}",
        headers={"Authorization": f"Bearer {READER}"},
    ).json()
    assert api["state"] == "queued" and api["pending"]["rules"]
    for rule in api["pending"]["rules"]:
        assert rule in shown  # word for word
    visit(signed_in, signed_in.current_url, screenshots, "job")


def test_decision_log_shows_the_fallback_and_filters_on_it(signed_in, fed_service, screenshots):
    visit(signed_in, f"{fed_service.url}/ui/clusters/kth/decisions", screenshots, "decisions")
    rows = texts(signed_in, "#decision-log tbody tr")
    assert len(rows) == 100  # one page of a few hundred decisions
    assert not any("model too large" in row for row in rows[:1])  # the live one, by PCP3
    assert any("model too large" in row for row in rows)
    old_log = signed_in.find_element("css selector", "#decision-log")
    signed_in.find_element("id", "only-fallbacks").click()  # the script submits the filter
    WebDriverWait(signed_in, WAIT_S).until(loaded.staleness_of(old_log))
    WebDriverWait(signed_in, WAIT_S).until(loaded.url_contains("fallbacks=true"))
    signed_in.find_element("css selector", "#decision-log")
    assert console_problems(signed_in) == []
    filtered = texts(signed_in, "#decision-log tbody tr")
    assert filtered and all("fallback" in row for row in filtered)
    assert any("model too large" in row for row in filtered)
    visit(
        signed_in,
        f"{fed_service.url}/ui/clusters/kth/decisions?fallbacks=true",
        screenshots,
        "decisions-fallbacks",
    )


def test_predictions(signed_in, fed_service, screenshots):
    visit(signed_in, f"{fed_service.url}/ui/clusters/kth/predictions", screenshots, "predictions")
    (row,) = texts(signed_in, "#accuracy-table tbody tr")
    assert row.startswith("last-two ")
    assert int(row.split()[1]) > 200  # most of the 300 replayed jobs
    dots = signed_in.find_elements("css selector", "#prediction-scatter circle")
    assert len(dots) == int(row.split()[1])
    assert signed_in.find_elements("css selector", "#prediction-errors polyline")


def test_latency_and_fallback_rate(signed_in, fed_service, screenshots):
    visit(signed_in, f"{fed_service.url}/ui/clusters/kth/latency?hours=72", screenshots, "latency")
    assert signed_in.find_elements("css selector", "#latency-chart polyline")
    assert signed_in.find_elements("css selector", "#queue-chart polyline")
    reasons = texts(signed_in, "#fallback-reasons tbody tr")
    assert any(r.startswith("model too large") for r in reasons)


def test_shadow_comparison(signed_in, fed_service, screenshots):
    visit(signed_in, f"{fed_service.url}/ui/clusters/shadow/latency", screenshots, "shadow")
    rows = {r.split()[0]: r.split()[-1] for r in texts(signed_in, "#shadow-table tbody tr")}
    assert rows == scenario.SHADOW_VERDICTS


def test_clusters_overview(signed_in, fed_service, screenshots):
    visit(signed_in, f"{fed_service.url}/ui/", screenshots, "clusters")
    assert [t.split()[0] for t in texts(signed_in, "tbody tr")] == ["kth", "shadow"]
