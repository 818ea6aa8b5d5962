"""The dashboard's pages and its sign-in, in process, on SQLite and on PostgreSQL."""

from __future__ import annotations

import re
import time

import pytest
from pydantic import SecretStr

from cpsched.service.ui.session import COOKIE
from tests.service.conftest import AUTH, TOKEN, TOKEN_A, TOKEN_READ, finished, job, snapshot
from tests.service.ui import scenario

HTML = {"accept": "text/html"}
FORM = {"content-type": "application/x-www-form-urlencoded"}
PAGES = ("", "/decisions", "/decisions?fallbacks=true", "/predictions", "/latency")


def sign_in(client, token=TOKEN_READ, next_path="/ui/"):
    return client.post(
        "/ui/login", content=f"token={token}&next={next_path}", headers=FORM, follow_redirects=False
    )


def dispatch(client, body, cluster="c1"):
    answer = client.post(f"/v1/clusters/{cluster}/dispatch", json=body, headers=AUTH)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture
def fed(make_client):
    """A service whose cluster c1 has a plan (PCP3), a fallback (the burst) and history."""
    # A deadline no busy machine misses: the burst's fallback is for its size alone.
    client = make_client(defaults={"dispatcher": "pcp3", "deadline": 5.0})
    client.post(
        "/v1/clusters/c1/jobs/finished",
        json={"jobs": [finished(f"f{i}", 100 * i, 100 * i + 50 + i) for i in range(1, 6)]},
        headers=AUTH,
    )
    assert dispatch(client, scenario.burst(20000))["diagnostics"]["fallback"] is True
    assert dispatch(client, scenario.live(20300))["diagnostics"]["fallback"] is False
    return client


def test_pages_need_a_token_or_a_session_and_do_no_work_without(fed, monkeypatch):
    def no_database():
        raise AssertionError("a refused request read the database")

    monkeypatch.setattr(fed.app.state.orchestrator, "sessions", no_database)
    for path in PAGES:
        page = fed.get(f"/ui/clusters/c1{path}", headers=HTML, follow_redirects=False)
        assert page.status_code == 303
        assert page.headers["location"].startswith("/ui/login?next=/ui/clusters/c1")
        assert fed.get(f"/ui/clusters/c1{path}").status_code == 401  # not a browser
    assert fed.get("/ui/", headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    fed.cookies.set(COOKIE, "YWxs.9999999999.00ff", path="/ui")
    assert fed.get("/ui/", headers=HTML, follow_redirects=False).status_code == 303
    monkeypatch.undo()
    assert fed.get("/ui/", headers={"Authorization": f"Bearer {TOKEN_READ}"}).status_code == 200


def test_sign_in_sets_a_strict_http_only_cookie(fed):
    refused = sign_in(fed, token="not-a-token")
    assert refused.status_code == 401
    assert "not one this service knows" in refused.text
    assert COOKIE not in refused.headers.get("set-cookie", "")
    signed = sign_in(fed, next_path="/ui/clusters/c1/decisions")
    assert signed.status_code == 303
    assert signed.headers["location"] == "/ui/clusters/c1/decisions"
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/ui" in cookie
    assert TOKEN_READ not in cookie  # the secret never leaves the server
    assert fed.get("/ui/clusters/c1/decisions").status_code == 200
    fed.post("/ui/logout")
    assert fed.get("/ui/clusters/c1", headers=HTML, follow_redirects=False).status_code == 303


def test_sign_in_never_sends_elsewhere(fed):
    for elsewhere in ("https://evil.example/", "//evil.example/ui/", "/ui/\\evil", "/v1/x"):
        assert sign_in(fed, next_path=elsewhere).headers["location"] == "/ui/"


def test_a_rotated_secret_or_a_removed_token_ends_the_session(make_client):
    client = make_client()
    dispatch(client, snapshot(queued=[job("q1")]))
    assert sign_in(client).status_code == 303
    app = client.app
    tokens = app.state.settings.tokens
    viewer = next(t for t in tokens if t.name == "viewer")
    assert client.get("/ui/clusters/c1").status_code == 200
    app.state.settings.tokens = [
        *[t for t in tokens if t.name != "viewer"],
        viewer.model_copy(update={"secret": SecretStr("a-new-secret-0123")}),
    ]
    assert client.get("/ui/clusters/c1").status_code == 401
    app.state.settings.tokens = tokens
    assert client.get("/ui/clusters/c1").status_code == 200  # the same secret again
    app.state.settings.tokens = [t for t in tokens if t.name != "viewer"]
    assert client.get("/ui/clusters/c1").status_code == 401


def test_an_expired_session_is_refused(fed, monkeypatch):
    assert sign_in(fed).status_code == 303
    assert fed.get("/ui/").status_code == 200
    later = time.time() + 9 * 3600
    monkeypatch.setattr("cpsched.service.ui.session.time.time", lambda: later)
    assert fed.get("/ui/").status_code == 401


def test_a_token_sees_only_its_clusters(fed):
    dispatch(fed, snapshot(queued=[job("qa")]), cluster="a")
    limited = {"Authorization": f"Bearer {TOKEN_A}"}
    index = fed.get("/ui/", headers=limited).text
    assert 'href="/ui/clusters/a"' in index
    assert 'href="/ui/clusters/c1"' not in index
    assert fed.get("/ui/clusters/c1", headers=limited).status_code == 403
    unknown = fed.get("/ui/clusters/never-seen", headers={"Authorization": f"Bearer {TOKEN}"})
    assert unknown.status_code == 404
    assert "text/html" in unknown.headers["content-type"]


def test_every_page_renders_with_the_security_headers(fed):
    sign_in(fed)
    for path in ("/ui/", *(f"/ui/clusters/c1{p}" for p in PAGES)):
        page = fed.get(path)
        assert page.status_code == 200, path
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["cache-control"] == "no-store"
        assert "style=" not in page.text  # the policy forbids inline styles
        assert "<script>" not in page.text  # and inline scripts
    for asset in ("ui.css", "ui.js", "favicon.svg"):
        assert fed.get(f"/ui/static/{asset}").status_code == 200


def test_queue_shows_what_each_job_waits_for(fed):
    sign_in(fed)
    page = fed.get("/ui/clusters/c1").text
    rows = re.findall(r'<th scope="row" class="job"><a [^>]*>([^<]+)</a></th>', page)
    assert rows == list(scenario.LIVE_QUEUED)
    # k-q02 asks for 16 cores; once the jobs starting now have theirs, fewer are free.
    row = page[page.index(">k-q02<") :].split("</tr>")[0]
    assert re.search(r"cpu \d+", row)
    for job_id in scenario.LIVE_RUNNING:
        assert f'data-job="{job_id}"' in page


def test_queue_names_the_site_rules_holding_a_job(fed):
    sign_in(fed)
    page = fed.get("/ui/clusters/c1").text
    held = page[page.index(">k-q12<") :].split("</tr>")[0]
    assert "held back: Dependency" in held
    assert "not planned" in held


def test_decision_log_filters_fallbacks(fed):
    sign_in(fed)
    everything = fed.get("/ui/clusters/c1/decisions").text
    assert everything.count("<tr") == 1 + 2  # header, live, burst
    fallbacks = fed.get("/ui/clusters/c1/decisions?fallbacks=true").text
    assert fallbacks.count("<tr") == 1 + 1
    assert "model too large" in fallbacks
    assert 'class="is-fallback"' in fallbacks


def test_decision_log_pages_back(make_client):
    client = make_client()
    for t in range(105):
        dispatch(client, snapshot(time=1000 + t, queued=[job(f"q{t}")]))
    first = client.get("/ui/clusters/c1/decisions", headers=AUTH).text
    assert first.count("<tr") == 101
    older = re.search(r'href="\?before=(\d+)"', first)
    assert older is not None
    rest = client.get(f"/ui/clusters/c1/decisions?before={older.group(1)}", headers=AUTH).text
    assert rest.count("<tr") == 1 + 5


def test_predictions_and_latency_pages_show_their_figures(fed):
    sign_in(fed)
    predictions = fed.get("/ui/clusters/c1/predictions").text
    assert "No job predicted at its start has finished yet" in predictions  # none started
    latency = fed.get("/ui/clusters/c1/latency?hours=24").text
    assert "<strong>2</strong> decisions, <strong>1</strong> by the fallback" in latency
    assert re.search(r"<th scope=\"row\">model too large</th><td class=\"num\">1<", latency)
    assert "No dry run has been answered" in latency
    assert re.search(r'id="queue-chart">\s*<svg', latency)
    assert ">Queue and running jobs</title>" in latency
    assert re.search(r'id="utilisation-chart"><svg', latency) and ">Utilisation</title>" in latency
    assert (
        re.search(r'id="wait-chart"><svg', latency) and ">Longest current wait</title>" in latency
    )


@pytest.fixture
def shadowed(make_client):
    """A service whose cluster ``shadow`` got only dry runs, then its finished jobs."""
    client = make_client()
    dry_runs, done = scenario.shadow()
    for body in dry_runs:
        dispatch(client, body, cluster="shadow")
    client.post("/v1/clusters/shadow/jobs/finished", json={"jobs": done}, headers=AUTH)
    return client


def test_shadow_mode_is_compared_with_the_real_starts(shadowed):
    client = shadowed
    page = client.get("/ui/clusters/shadow/latency", headers=AUTH).text
    verdicts = dict(
        re.findall(r'<tr><th scope="row">(s\d)</th>.*?class="tag tag-(\w+)"', page, re.S)
    )
    assert verdicts == scenario.SHADOW_VERDICTS
    # Listed by verdict: only the jobs cpsched would have started later.
    later = client.get("/ui/clusters/shadow/latency?verdict=later", headers=AUTH).text
    listed = dict(
        re.findall(r'<tr><th scope="row">(s\d)</th>.*?class="tag tag-(\w+)"', later, re.S)
    )
    assert listed == {j: v for j, v in scenario.SHADOW_VERDICTS.items() if v == "later"}
    assert "later" in listed.values()
    assert re.search(r"in all\s+\S[^<]*?of\s+waiting", page)


def test_each_job_page_says_what_the_workload_manager_did_instead(shadowed):
    client = shadowed
    for job_id, verdict in scenario.SHADOW_VERDICTS.items():
        html = client.get(f"/ui/clusters/shadow/jobs/{job_id}", headers=AUTH).text
        said = re.search(r'<p id="job-shadow" data-verdict="([^"]+)">(.*?)</p>', html, re.S)
        assert said is not None, job_id
        assert said.group(1) == verdict  # the shadow table's verdict, job by job
        assert "the workload manager started it at" in said.group(2)
        api = client.get(f"/v1/clusters/shadow/jobs/{job_id}", headers=AUTH).json()
        for d in api["decisions"]:  # each dry run that would have started it, linked
            assert f'href="/ui/clusters/shadow/decisions/{d["decision_id"]}"' in html
            assert "would have started it (dry run)" in html


def test_the_job_page_links_the_decision_that_started_it(client):
    answer = dispatch(client, snapshot(queued=[job("q1")]))
    running = {**job("q1"), "start": 1000, "allocation": {"n1": 1}}
    dispatch(client, snapshot(time=1060, running=[running]))
    html = client.get("/ui/clusters/c1/jobs/q1", headers=AUTH).text
    listed = re.search(r'<ul id="job-decisions">(.*?)</ul>', html, re.S)
    assert listed is not None
    assert f'/decisions/{answer["decision_id"]}">decision #{answer["decision_id"]}</a>' in (
        listed.group(1)
    )
    assert "started it" in listed.group(1) and "job-shadow" not in html


def test_the_job_page_says_what_its_prediction_rests_on(client):
    done = [finished("f1", 0, 300), finished("f2", 400, 900)]  # alice ran 300 s and 500 s
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": done}, headers=AUTH)
    dispatch(client, snapshot(queued=[job("q1")]))
    api = client.get("/v1/clusters/c1/jobs/q1", headers=AUTH).json()
    assert api["predicted_run_time"] == 400
    assert api["prediction_basis"] == (
        "the mean run time of the user's two latest finished jobs (500 s and 300 s)"
    )
    html = client.get("/ui/clusters/c1/jobs/q1", headers=AUTH).text
    assert "from the mean run time of the user&#39;s two latest finished jobs" in html


def test_a_started_job_is_planned_to_its_upper_estimate_and_the_page_says_why(make_client):
    client = make_client(defaults={"prediction_upper_quantile": 0.9})
    done = [finished("f1", 0, 300), finished("f2", 400, 900)]  # predicted 600 s, then 300 s
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": done}, headers=AUTH)
    answer = dispatch(client, snapshot(queued=[job("q1", limit=2000)]))
    assert [s["job_id"] for s in answer["starts"]] == ["q1"]
    api = client.get("/v1/clusters/c1/jobs/q1", headers=AUTH).json()
    # Central 400 s (last-two); everyone's ratios 0.5 and 500/300: the upper 400 × 5/3.
    assert api["predicted_run_time"] == 667
    assert api["prediction_basis"].startswith("1.67 times the mean run time of the user's")
    assert (
        "0.9 quantile of run time over that prediction in all users' 2 latest"
        in (api["prediction_basis"])
    )


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "https://evil.example"},
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
    ],
)
def test_sign_in_and_out_from_another_site_are_refused(client, headers):
    login = client.post(
        "/ui/login",
        content=f"token={TOKEN}&next=/ui/",
        headers={**FORM, **headers},
        follow_redirects=False,
    )
    assert login.status_code == 403 and COOKIE not in login.cookies
    assert client.post("/ui/logout", headers=headers, follow_redirects=False).status_code == 403


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://testserver", "sec-fetch-site": "same-origin"},
        # Chromium on a page with "no-referrer": its own origin hidden, Sec-Fetch-Site says.
        {"origin": "null", "sec-fetch-site": "same-origin"},
        {"origin": "http://testserver"},  # a browser without Sec-Fetch-Site
    ],
)
def test_sign_in_from_the_services_own_page_is_accepted(client, headers):
    login = client.post(
        "/ui/login",
        content=f"token={TOKEN}&next=/ui/",
        headers={**FORM, **headers},
        follow_redirects=False,
    )
    assert login.status_code == 303 and COOKIE in login.cookies


def test_a_job_is_found_by_id_and_its_page_says_why_it_waits_as_the_api_does(fed):
    job_id = scenario.LIVE_QUEUED[-1]  # held back by Slurm: a dependency
    found = fed.get(f"/ui/clusters/c1/jobs?id={job_id}", headers=AUTH, follow_redirects=False)
    assert found.status_code == 303
    assert found.headers["location"] == f"/ui/clusters/c1/jobs/{job_id}"
    html = fed.get(found.headers["location"], headers=AUTH).text
    api = fed.get(f"/v1/clusters/c1/jobs/{job_id}", headers=AUTH).json()
    assert api["state"] == "queued" and api["pending"]["rules"]
    why = re.search(r'<ul id="job-why">(.*?)</ul>', html, re.S)
    assert why is not None
    for rule in api["pending"]["rules"]:
        assert rule in why.group(1)  # the same words as the API's
    asks = ", ".join(f"{name} {amount}" for name, amount in api["request"].items())
    assert f'<dd id="job-request">{asks} for at most' in html
    if api["partition"]:
        assert f'<dd id="job-partition">{api["partition"]}</dd>' in html
    queue = fed.get("/ui/clusters/c1", headers=AUTH).text
    assert f'href="/ui/clusters/c1/jobs/{job_id}"' in queue  # the queue links each job


def test_the_job_page_gives_the_start_guarantee(make_client):
    client = make_client(defaults={"wait_bound": 60})
    busy = {**job("r1", units=8, limit=600), "start": 500}
    busy["allocation"] = {"n1": 4, "n2": 4}
    dispatch(client, snapshot(running=[busy], queued=[job("q1", submit=900, units=8)]))
    html = client.get("/ui/clusters/c1/jobs/q1", headers=AUTH).text
    guarantee = re.search(r'<li id="job-guarantee">(.*?)</li>', html)
    assert guarantee is not None and "guaranteed to start by" in guarantee.group(1)
    queue = client.get("/ui/clusters/c1", headers=AUTH).text
    assert queue.count("tag-guarantee") == 1  # q1's row says so, in the queue too


def test_the_job_page_says_when_todays_scheduler_would_have_started_it(make_client):
    client = make_client(defaults={"wait_bound_today": 3600})
    busy = {**job("r1", units=4, limit=600), "start": 500, "allocation": {"n1": 4}}
    body = snapshot(running=[busy], queued=[job("q1", submit=900, units=2)])
    client.post("/v1/clusters/c1/dispatch", json={**body, "dry_run": True}, headers=AUTH)
    html = client.get("/ui/clusters/c1/jobs/q1", headers=AUTH).text
    today = re.search(r'<li id="job-today">(.*?)</li>', html)
    assert today is not None and "would have started it at" in today.group(1)


def test_an_unknown_job_page_is_a_404_that_says_so(fed):
    answer = fed.get("/ui/clusters/c1/jobs/no-such-job", headers=AUTH)
    assert answer.status_code == 404 and "knows no job no-such-job" in answer.text
    assert fed.get("/ui/clusters/c1/jobs?id=", headers=AUTH).status_code == 422


def test_the_whole_queue_is_paged_and_the_gantt_says_what_it_leaves_out(make_client):
    client = make_client()  # EASY
    queued = [job(f"q{i:04d}", submit=i, units=2) for i in range(1100)]
    dispatch(client, snapshot(time=5000, queued=queued))
    first = client.get("/ui/clusters/c1", headers=AUTH).text
    assert "1 to 500 of 1100" in first and "page 1 of 3" in first
    last = client.get("/ui/clusters/c1?page=3", headers=AUTH).text
    assert "1001 to 1100 of 1100" in last
    assert ">q1099</a>" in last and ">q0000</a>" not in last
    note = re.search(r'<p class="note" id="gantt-note">(.*?)</p>', first, re.S)
    assert note is not None and "idle nodes left out" in note.group(1)
    assert client.get("/ui/clusters/c1?page=0", headers=AUTH).status_code == 422


def test_a_decision_reads_in_words_with_its_starts_notes_and_phase_times(fed):
    sign_in(fed)
    log = fed.get("/ui/clusters/c1/decisions").text
    ids = re.findall(r'href="/ui/clusters/c1/decisions/(\d+)"', log)
    assert len(ids) == 2  # the live decision (PCP3), then the burst (the fallback)
    live = fed.get(f"/ui/clusters/c1/decisions/{ids[0]}").text
    assert "was its own" in live and 'id="decision-starts"' in live
    assert 'href="/ui/clusters/c1/jobs/' in live  # each start links its job
    assert 'id="decision-phases"' in live and ">solve</th>" in live  # a CP call's phases
    burst = fed.get(f"/ui/clusters/c1/decisions/{ids[1]}").text
    assert "came from the <strong>fallback</strong> because the model would have been" in burst
    assert "of the 5,000 ms the service has per answer" in burst
    assert fed.get("/ui/clusters/c1/decisions/999999").status_code == 404


def test_fallback_reasons_read_in_words():
    from cpsched.service.ui.fmt import fallback_reason, phases

    assert fallback_reason("no time left for solve") == "the deadline came before the solve phase"
    assert fallback_reason("deadline").startswith("the dispatcher had not answered")
    assert fallback_reason("something new") == "something new"
    assert phases(("x", "phases ms: fallback 0.4, solve 12.0")) == [
        ("fallback", "0.4"),
        ("solve", "12.0"),
    ]


def _queue_ids(html: str) -> list[str]:
    return re.findall(r'<th scope="row" class="job"><a [^>]*>([^<]+)</a></th>', html)


@pytest.fixture
def squeue(make_client):
    """Four queued jobs with users, partitions, QOS names and priorities (EASY, a busy
    machine: none starts)."""
    client = make_client()
    busy = {**job("r1", units=8, limit=9000), "start": 0, "allocation": {"n1": 4, "n2": 4}}
    spec = [  # id, user, partition, qos, priority, submit, limit
        ("q9", "alice", "batch", "normal", 10, 100, 600),
        ("q10", "bob", "batch,debug", "high", 50, 300, 7200),
        ("q11", "carol", "debug", "", None, 200, 60),
        ("q12", "bob", "batch", "normal", 30, 400, 3600),
    ]
    queued = [
        {**job(i, submit=s, limit=lim), "user": u, "partition": p}
        | ({"qos": q} if q else {})
        | ({"priority": pr} if pr is not None else {})
        for i, u, p, q, pr, s, lim in spec
    ]
    body = snapshot(time=5000, running=[busy], queued=queued)
    body["partitions"] = [
        {"name": "batch", "nodes": ["n1", "n2"]},
        {"name": "debug", "nodes": ["n1"]},
    ]
    dispatch(client, body)
    return client


def test_the_queue_shows_the_qos_and_sorts_the_whole_queue(squeue):
    get = lambda query: squeue.get(f"/ui/clusters/c1{query}", headers=AUTH)  # noqa: E731
    plain = get("").text
    assert _queue_ids(plain) == ["q9", "q11", "q10", "q12"]  # queue order: by submit
    row = plain[plain.index(">q10<") :].split("</tr>")[0]
    assert "<td>high</td>" in row and "<td>batch,debug</td>" in row
    # Priority: the highest first; a job without one last, whichever way.
    assert _queue_ids(get("?sort=priority").text) == ["q10", "q12", "q9", "q11"]
    assert _queue_ids(get("?sort=priority&dir=asc").text) == ["q9", "q12", "q10", "q11"]
    waited = get("?sort=wait").text  # the longest wait first
    assert _queue_ids(waited) == ["q9", "q11", "q10", "q12"]
    assert 'aria-sort="descending"' in waited and "by wait, largest first" in waited
    assert _queue_ids(get("?sort=limit").text) == ["q11", "q9", "q12", "q10"]
    assert _queue_ids(get("?sort=job&dir=desc").text) == ["q12", "q11", "q10", "q9"]  # 9 < 10
    assert _queue_ids(get("?sort=qos").text) == ["q10", "q9", "q12", "q11"]  # none: last
    # Each row keeps its place in the queue's order, whatever the page's order.
    positions = re.findall(r'<tr>\s*<td class="num">(\d+)</td>', get("?sort=priority").text)
    assert positions == ["3", "4", "1", "2"]


def test_the_queue_filters_by_user_partition_and_qos_and_links_keep_them(squeue):
    get = lambda query: squeue.get(f"/ui/clusters/c1{query}", headers=AUTH)  # noqa: E731
    bob = get("?user=bob").text
    assert _queue_ids(bob) == ["q10", "q12"]
    assert "2 of the 4 queued jobs" in bob
    assert 'href="?sort=wait&amp;user=bob"' in bob  # sorting keeps the filter
    assert 'id="clear-filter"' in bob
    assert _queue_ids(get("?partition=debug").text) == ["q11", "q10"]  # one of its two
    assert _queue_ids(get("?qos=normal&sort=wait&dir=asc").text) == ["q12", "q9"]
    assert _queue_ids(get("?user=bob&qos=high").text) == ["q10"]
    nobody = get("?user=nobody")
    assert nobody.status_code == 200
    assert "None of the 4 queued jobs matches this filter" in nobody.text
    # The form suggests the values this queue has.
    assert '<option value="high">' in bob and '<option value="carol">' in bob


def test_bad_queue_parameters_are_a_4xx_and_a_page_past_the_end_shows_the_last(squeue):
    get = lambda query: squeue.get(f"/ui/clusters/c1{query}", headers=AUTH)  # noqa: E731
    for bad in ("?sort=nonsense", "?dir=up", "?page=-1", "?page=x", f"?user={'u' * 300}"):
        assert get(bad).status_code == 422, bad
    last = get("?page=99")
    assert last.status_code == 200 and _queue_ids(last.text) == ["q9", "q11", "q10", "q12"]


def test_sorting_pages_over_the_whole_queue(make_client):
    client = make_client()
    queued = [job(f"q{i:04d}", submit=i, units=2) for i in range(1100)]
    dispatch(client, snapshot(time=5000, queued=queued))
    newest = client.get("/ui/clusters/c1?sort=wait&dir=asc", headers=AUTH).text
    assert _queue_ids(newest)[:2] == ["q1099", "q1098"]  # the whole queue sorted, not a page
    assert 'href="?sort=wait&amp;dir=asc&amp;page=2"' in newest
    third = client.get("/ui/clusters/c1?sort=wait&dir=asc&page=3", headers=AUTH).text
    assert _queue_ids(third)[-1] == "q0000" and "1001 to 1100 of 1100" in third


def test_the_latency_page_and_metrics_give_waits_by_job_length(make_client):
    client = make_client()
    dispatch(client, snapshot(time=1000, queued=[job("a", submit=900)]))
    done = [
        {**finished("a", 1000, 1600), "submit": 900},
        {**finished("b", 1200, 1200 + 6 * 3600), "submit": 200},
    ]
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": done}, headers=AUTH)
    dispatch(client, snapshot(time=3000))
    latency = client.get("/ui/clusters/c1/latency?hours=1", headers=AUTH).text
    assert re.search(r'id="class-wait-chart"><svg', latency)
    assert ">Waits by job length</title>" in latency
    metrics = client.get("/metrics").text
    assert 'cpsched_job_wait_seconds_sum{cluster="c1",length="short"} 100.0' in metrics
    assert 'cpsched_job_wait_seconds_sum{cluster="c1",length="long"} 1000.0' in metrics
