"""One writer per cluster: a second bridge's dispatches are refused (423) until the first
has been silent for the lease; dry runs and calls naming no writer are not checked
(issue 42, item 2)."""

from __future__ import annotations

import time

from tests.service.conftest import AUTH, job, snapshot

A = {**AUTH, "X-Cpsched-Writer": "head1:aaaa1111"}
B = {**AUTH, "X-Cpsched-Writer": "head2:bbbb2222"}


def dispatch(client, headers: dict[str, str], at: int, **extra: object):
    body = {**snapshot(time=at, queued=[job(f"j{at}", submit=at)]), **extra}
    return client.post("/v1/clusters/c1/dispatch", json=body, headers=headers)


def test_a_second_bridge_is_refused_and_takes_over_once_the_first_is_silent(
    make_client,
) -> None:
    client = make_client(writer_lease_s=0.5)
    assert dispatch(client, A, 1000).status_code == 200
    refused = dispatch(client, B, 1001)
    assert refused.status_code == 423
    assert refused.json()["error"] == "writer_conflict"
    assert "head1:aaaa1111" in refused.json()["detail"]
    assert "standby" in refused.json()["detail"]
    # Promising nothing, a dry run (shadow mode) or a call naming no writer is answered.
    assert dispatch(client, B, 1002, dry_run=True).status_code == 200
    assert dispatch(client, AUTH, 1003).status_code == 200
    assert dispatch(client, A, 1004).status_code == 200  # the holder renews
    metrics = client.get("/metrics").text
    assert 'cpsched_writer_conflicts_total{cluster="c1"} 1.0' in metrics
    time.sleep(0.6)  # the first bridge stopped: its lease runs out
    assert dispatch(client, B, 1005).status_code == 200
    assert dispatch(client, A, 1006).status_code == 423  # now the first is the standby


def test_no_lease_when_the_site_turns_it_off(make_client) -> None:
    client = make_client(writer_lease_s=0)
    assert dispatch(client, A, 1000).status_code == 200
    assert dispatch(client, B, 1001).status_code == 200


def test_the_lease_survives_a_restart_of_the_service(make_client) -> None:
    # The holder's lease is stored with its dispatches: after a restart (a new app on the
    # same database) the standby is still refused and the holder goes on.
    before = make_client(writer_lease_s=30)
    assert dispatch(before, A, 1000).status_code == 200
    after = make_client(writer_lease_s=30)
    assert dispatch(after, B, 1001).status_code == 423
    assert dispatch(after, A, 1002).status_code == 200


def test_a_restart_does_not_lengthen_a_lease_that_ran_out(make_client) -> None:
    before = make_client(writer_lease_s=0.5)
    assert dispatch(before, A, 1000).status_code == 200
    time.sleep(0.6)
    after = make_client(writer_lease_s=0.5)
    assert dispatch(after, B, 1001).status_code == 200
