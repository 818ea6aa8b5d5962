"""The Slurm backend's JSON and slurmrestd sources on 22.05 and 24.11: the version learned
once, the commands run, the API version found in slurmrestd's OpenAPI document, and time
limits posted in that version's shape. Commands and HTTP answers are scripted with
recorded outputs (``fixtures/slurm``, ``fixtures/slurm-24.11``); slurmrestd's answers are
the same data_parser dumps as the commands' (``/jobs`` as ``squeue --json``, ``/nodes``
as ``scontrol --json show nodes``, or 22.05's ``sinfo --json``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest

from cpsched.slurm_bridge.errors import CommandError, StateParseError
from cpsched.slurm_bridge.slurm_backend import SlurmBackend
from cpsched.slurm_bridge.slurm_rest import RestApi, SlurmRestClient, discover
from tests.slurm_bridge.test_slurm_backend_reads import Script

FIXTURES = Path(__file__).parent / "fixtures"
V22, V24 = "slurm 22.05.8\n", "slurm-wlm 24.11.5\n"


def fixture(version: str, name: str) -> str:
    return (FIXTURES / version / name).read_text()


def slurm(version: str, outputs: dict[tuple[str, ...], str]) -> Script:
    """A Slurm answering ``--version`` with ``version``, the partitions of the 24.11 test
    bed, no reservations, and ``outputs`` (argv without the program's path → stdout);
    anything else fails, as sacctmgr and ``show config`` would without slurmdbd."""
    partitions = fixture("slurm-24.11", "scontrol_show_partition_o.txt")

    def answer(argv: list[str]) -> str:
        said = (Path(argv[0]).name, *argv[1:])
        if said == ("scontrol", "--version"):
            return version
        if said == ("scontrol", "-o", "show", "partition"):
            return partitions
        if said[:3] == ("scontrol", "-o", "show") and said[3] == "reservation":
            return "No reservations in the system\n"
        if said in outputs:
            return outputs[said]
        raise CommandError(argv, "exit status 1", "not scripted")

    return Script(answer)


def test_24_11_json_source_reads_scontrol_nodes_and_squeue_once_told_the_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = slurm(
        V24,
        {
            ("scontrol", "--json=v0.0.42", "show", "nodes"): fixture(
                "slurm-24.11", "scontrol_show_nodes.json"
            ),
            ("squeue", "-a", "--states=all", "--json=v0.0.42"): fixture(
                "slurm-24.11", "squeue.json"
            ),
        },
    )
    backend = SlurmBackend(runner=script, bin_dir=Path("/opt/slurm/bin"))
    with caplog.at_level(logging.INFO, logger="slurm_bridge.slurm"):
        state = backend.read_state()
        again = backend.read_state()
    assert [argv for argv in script.argvs if "--version" in argv] == [
        ["/opt/slurm/bin/scontrol", "--version"]
    ]
    assert sum("Slurm 24.11.5" in r.getMessage() for r in caplog.records) == 1
    assert state.notes == () and state.unreadable == () and again.jobs == state.jobs
    assert {j.id for j in state.held} == {"16"} and {j.id for j in state.running} == {
        "14",
        "15",
        "18",
    }
    assert set(state.nodes) == {"gpu1", "gpu2", "node1", "node2"}


def test_unreadable_jobs_reach_the_cluster_state() -> None:
    doc = json.loads(fixture("slurm-24.11", "squeue.json"))
    doc["jobs"][0]["job_state"] = ["RUNNING", "HIBERNATING"]
    script = slurm(
        V24,
        {
            ("scontrol", "--json=v0.0.42", "show", "nodes"): fixture(
                "slurm-24.11", "scontrol_show_nodes.json"
            ),
            ("squeue", "-a", "--states=all", "--json=v0.0.42"): json.dumps(doc),
        },
    )
    state = SlurmBackend(runner=script).read_state()
    ((job, why),) = state.unreadable
    assert job == "14" and "14" not in {j.id for j in state.jobs}
    assert why.startswith(
        "squeue -a --states=all --json=v0.0.42 (Slurm 24.11.5): job 14: unknown job state"
    )


def test_22_05_json_source_reads_sinfo_and_squeue() -> None:
    script = slurm(
        V22,
        {
            ("sinfo", "--json"): fixture("slurm", "sinfo_busy.json"),
            ("squeue", "-a", "--json"): fixture("slurm", "squeue.json"),
        },
    )
    backend = SlurmBackend(runner=script)
    state = backend.read_state()
    assert state.notes == () and state.nodes["gpu1"].used["gpu"] == 2
    assert str(backend.slurm_version) == "22.05.8"


def test_json_not_read_falls_back_to_the_text_formats_saying_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """23.02's JSON is data_parser v0.0.39 only: the text formats are read instead."""
    script = slurm("slurm 23.02.7\n", {})
    with pytest.raises(CommandError):  # the text formats are not scripted here
        SlurmBackend(runner=script).read_state()
    assert any(
        "Slurm 23.02.7" in r.getMessage() and "v0.0.39" in r.getMessage() for r in caplog.records
    )
    assert not any("--json" in " ".join(argv) for argv in script.argvs)


def test_a_version_that_cannot_be_read_stops_the_read() -> None:
    with pytest.raises(StateParseError, match="scontrol --version"):
        SlurmBackend(runner=slurm("Slurm is great\n", {})).read_state()


# ---- slurmrestd ---------------------------------------------------------------------------


class Server:
    """slurmrestd serving recorded documents; records the POSTs."""

    def __init__(self, documents: dict[str, str]) -> None:
        self.documents = documents
        self.posts: list[tuple[str, object]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.posts.append((request.url.path, json.loads(request.content)))
            return httpx.Response(200, json={"errors": []})
        if request.url.path in self.documents:
            return httpx.Response(200, text=self.documents[request.url.path])
        return httpx.Response(404, text="Unable to find requested URL")

    def client(self) -> SlurmRestClient:
        return SlurmRestClient(socket=None, transport=httpx.MockTransport(self))


SERVER_24 = {
    "/openapi/v3": fixture("slurm-24.11", "openapi.json"),
    "/slurm/v0.0.42/jobs/": fixture("slurm-24.11", "squeue.json"),
    "/slurm/v0.0.42/nodes/": fixture("slurm-24.11", "scontrol_show_nodes.json"),
}
SERVER_22 = {
    "/openapi/v3": fixture("slurm", "openapi.json"),
    "/slurm/v0.0.38/jobs": fixture("slurm", "squeue_running.json"),
    "/slurm/v0.0.38/nodes": fixture("slurm", "sinfo_busy.json"),
}


def test_the_api_version_is_found_in_the_openapi_document() -> None:
    assert discover(json.loads(SERVER_24["/openapi/v3"])) == RestApi(
        version="v0.0.42",
        jobs="/slurm/v0.0.42/jobs/",
        nodes="/slurm/v0.0.42/nodes/",
        job="/slurm/v0.0.42/job/{job_id}",
    )
    assert discover(json.loads(SERVER_22["/openapi/v3"])) == RestApi(
        version="v0.0.38",
        jobs="/slurm/v0.0.38/jobs",
        nodes="/slurm/v0.0.38/nodes",
        job="/slurm/v0.0.38/job/{job_id}",
    )


def test_an_api_the_readers_do_not_read_is_a_clear_error() -> None:
    spec = json.loads(SERVER_24["/openapi/v3"])
    spec["paths"] = {p.replace("v0.0.4", "v0.0.3"): v for p, v in spec["paths"].items()}
    with pytest.raises(StateParseError, match=r"v0\.0\.30, v0\.0\.31, v0\.0\.32; the bridge"):
        discover(spec)


@pytest.mark.parametrize(
    ("version", "documents", "limit_body"),
    [
        (V24, SERVER_24, {"set": True, "infinite": False, "number": 17}),
        (V22, SERVER_22, 17),
    ],
)
def test_rest_source_reads_and_extends_at_the_version_found(
    version: str, documents: dict[str, str], limit_body: object
) -> None:
    server = Server(documents)
    client = server.client()
    backend = SlurmBackend(runner=slurm(version, {}), source="rest", rest=client)
    state = backend.read_state()
    assert state.notes == () and state.running and state.nodes
    backend.extend("14", 17 * 60 - 30)
    assert server.posts == [(client.api.job.replace("{job_id}", "14"), {"time_limit": limit_body})]


def test_rest_extends_an_array_element_through_scontrol() -> None:
    """slurmrestd 24.11 refuses an update addressed to ``123_4``."""
    server = Server(SERVER_24)
    script = slurm(V24, {("scontrol", "update", "JobId=123_4", "TimeLimit=17"): ""})
    SlurmBackend(runner=script, source="rest", rest=server.client()).extend("123_4", 17 * 60)
    assert server.posts == [] and script.argvs[-1][-1] == "TimeLimit=17"


def test_a_server_without_openapi_v3_is_asked_at_openapi() -> None:
    server = Server({"/openapi": SERVER_22["/openapi/v3"]})
    assert server.client().api.version == "v0.0.38"


def test_a_server_that_fails_is_a_command_error() -> None:
    server = Server({})
    with pytest.raises(CommandError, match="slurmrestd"):
        server.client().jobs()
