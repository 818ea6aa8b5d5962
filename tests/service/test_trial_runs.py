"""Trial runs through the service: offered only to jobs the bridge says may go back to
the queue, once; a running trial planned to end with it."""

from __future__ import annotations

from typing import Any

from tests.service.conftest import AUTH, job, node, snapshot


def dispatch(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH)
    assert answer.status_code == 200, answer.text
    return answer.json()


# One 4-core node: r holds 3 cores; a needs all 4 and waits (FCFS), b (1 core) waits
# behind it, leaving one core idle.
R = {**job("r", limit=1000, units=3), "start": 500, "allocation": {"n1": 3}}
A = job("a", submit=900, units=4)
B = job("b", submit=950, limit=3000)


def test_a_job_that_may_go_back_is_tried_once_on_the_idle_core(make_client: Any) -> None:
    client = make_client(defaults={"dispatcher": "fcfs", "trial_run": 60})
    first = dispatch(client, snapshot(1000, [node("n1")], [R], [A, {**B, "requeue": True}]))
    assert [(s["job_id"], s["allocation"], s["trial_s"]) for s in first["starts"]] == [
        ("b", {"n1": 1}, 60)
    ]
    assert 'cpsched_trial_runs_total{cluster="c1"} 1.0' in client.get("/metrics").text
    # Running its trial: the service is told when it ends, and starts nothing more.
    trial = {**B, "requeue": True, "start": 1001, "allocation": {"n1": 1}, "trial_end": 1061}
    running = dispatch(client, snapshot(1030, [node("n1")], [R, trial], [A]))
    assert running["starts"] == []
    # Put back by the bridge (Slurm counts a restart): never tried again, even by a
    # service restarted since (what it tried is in memory only).
    back = {**B, "requeue": True, "restarts": 1}
    again = dispatch(client, snapshot(1070, [node("n1")], [R], [A, back]))
    assert again["starts"] == []
    restarted = make_client(defaults={"dispatcher": "fcfs", "trial_run": 60})
    assert dispatch(restarted, snapshot(1080, [node("n1")], [R], [A, back]))["starts"] == []


def test_a_job_the_bridge_does_not_say_may_go_back_is_not_tried(make_client: Any) -> None:
    client = make_client(defaults={"dispatcher": "fcfs", "trial_run": 60})
    assert dispatch(client, snapshot(1000, [node("n1")], [R], [A, B]))["starts"] == []


def test_a_running_trial_is_refused_if_it_ends_before_it_starts(client: Any) -> None:
    trial = {**B, "start": 1001, "allocation": {"n1": 1}, "trial_end": 1001}
    answer = client.post(
        "/v1/clusters/c1/dispatch", json=snapshot(1030, [node("n1")], [trial], []), headers=AUTH
    )
    assert answer.status_code == 422 and "trial_end" in answer.text
