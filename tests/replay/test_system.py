"""Machine descriptions: TOML system files, the shipped examples, SWF-header machines."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpsched.errors import ConfigError, TraceError
from cpsched.replay.swf import SwfHeader
from cpsched.replay.system import load_system, system_from_header

SYSTEMS = Path(__file__).resolve().parents[2] / "systems"
SHIPPED = sorted(SYSTEMS.glob("*.toml"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "machine.toml"
    path.write_text(text)
    return path


def header(**fields: str) -> SwfHeader:
    def number(key: str) -> int | None:
        value = fields.get(key, "").split(" ")[0]
        return int(value) if value.isdigit() else None

    return SwfHeader(fields, number("MaxNodes"), number("MaxProcs"), None)


def test_the_expected_examples_ship() -> None:
    names = {p.stem for p in SHIPPED}
    assert {"hpc2n", "ctc", "kth", "curie", "metacentrum"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_system_files_load(path: Path) -> None:
    system = load_system(path)
    assert system.resource_names[0] == "cpu"
    assert system.nodes
    assert all(n.capacity[0] >= 1 for n in system.nodes)
    assert len({n.name for n in system.nodes}) == len(system.nodes)
    assert system.max_time_limit is None or system.max_time_limit > 0
    assert str(path) in system.source


@pytest.mark.parametrize(
    ("stem", "nodes", "cpus"),
    [
        ("hpc2n", 120, 240),
        ("ctc", 338, 338),
        ("kth", 100, 100),
        ("curie", 5544, 93312),
        ("metacentrum", 232, 806),
    ],
)
def test_shipped_machine_sizes(stem: str, nodes: int, cpus: int) -> None:
    system = load_system(SYSTEMS / f"{stem}.toml")
    assert (len(system.nodes), sum(n.capacity[0] for n in system.nodes)) == (nodes, cpus)


def test_groups_resources_and_names(tmp_path: Path) -> None:
    system = load_system(
        write(
            tmp_path,
            """
name = "Mixed"
max_time_limit = 86400
[units]
mem = "MB"
gpu = "devices"
[[nodes]]
group = "thin"
count = 2
cpu = 16
mem = 64000
[[nodes]]
group = "gpu"
count = 1
cpu = 8
gpu = 2
mem = 24000
mic = 0
""",
        )
    )
    assert system.name == "Mixed"
    assert system.max_time_limit == 86400
    assert system.resource_names == ("cpu", "mem", "gpu", "mic")
    assert [(n.name, n.capacity) for n in system.nodes] == [
        ("thin0000", (16, 64000, 0, 0)),
        ("thin0001", (16, 64000, 0, 0)),
        ("gpu0000", (8, 24000, 2, 0)),
    ]


def test_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    system = load_system(write(tmp_path, "[[nodes]]\ngroup = 'a'\ncount = 1\ncpu = 1\n"))
    assert (system.name, system.max_time_limit) == ("machine", None)


GROUP = "[[nodes]]\ngroup = 'thin'\n"
BROKEN = [
    ("count missing", GROUP + "cpu = 2\n", "count is missing"),
    ("count zero", GROUP + "count = 0\ncpu = 2\n", "count must be"),
    ("count float", GROUP + "count = 1.5\ncpu = 2\n", "count must be"),
    ("negative", GROUP + "count = 1\ncpu = 2\nmem = -1\n", "non-negative"),
    ("float amount", GROUP + "count = 1\ncpu = 2\nmem = 1.5\n", "non-negative"),
    ("string amount", GROUP + "count = 1\ncpu = '2'\n", "non-negative"),
    ("bool amount", GROUP + "count = 1\ncpu = 2\ngpu = true\n", "non-negative"),
    ("cpu missing", GROUP + "count = 1\nmem = 4\n", "cpu is missing"),
    ("cpu zero", GROUP + "count = 1\ncpu = 0\n", "cpu is missing"),
    ("no nodes", "name = 'x'\n", "no nodes"),
    ("empty nodes", "nodes = []\n", "no nodes"),
    ("group missing", "[[nodes]]\ncount = 1\ncpu = 1\n", "needs group"),
    ("unknown key", "cores = 4\n" + GROUP + "count = 1\ncpu = 1\n", "unknown top-level"),
    ("bad syntax", "[[nodes]\ngroup = \n", "not valid TOML"),
    ("bad limit", "max_time_limit = 0\n" + GROUP + "count = 1\ncpu = 1\n", "max_time_limit"),
    ("mem in GB", "[units]\nmem = 'GB'\n" + GROUP + "count = 1\ncpu = 1\n", "in MB"),
    ("empty name", "name = ''\n" + GROUP + "count = 1\ncpu = 1\n", "name"),
    (
        "name clash",
        "[[nodes]]\ngroup = 'a'\ncount = 20000\ncpu = 1\n"
        "[[nodes]]\ngroup = 'a1'\ncount = 1\ncpu = 1\n",
        "rename",
    ),
]

# Problems inside a [[nodes]] table must say which group to fix.
GROUP_ERRORS = {
    "count missing",
    "count zero",
    "count float",
    "negative",
    "float amount",
    "string amount",
    "bool amount",
    "cpu missing",
    "cpu zero",
}


@pytest.mark.parametrize(("case", "text", "message"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_system_files(tmp_path: Path, case: str, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as info:
        load_system(path)
    assert str(path) in str(info.value)
    if case in GROUP_ERRORS:
        assert "group 'thin'" in str(info.value)


def test_missing_system_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_system(tmp_path / "nope.toml")


def test_machine_from_header() -> None:
    system = system_from_header(header(MaxNodes="240", MaxProcs="240"), "HPC2N.swf")
    assert system.resource_names == ("cpu",)
    assert len(system.nodes) == 240
    assert system.nodes[0].name == "node0000"
    assert system.nodes[-1].name == "node0239"
    assert {n.capacity for n in system.nodes} == {(1,)}
    assert system.source == "derived from SWF header: 240 nodes x 1 cpu"
    assert system.max_time_limit is None


def test_machine_from_header_with_notes_and_max_runtime() -> None:
    fields = {"MaxNodes": "338 (batch partition; 512 total)", "MaxProcs": "676"}
    system = system_from_header(header(**fields, MaxRuntime="64800"), "CTC.swf")
    assert len(system.nodes) == 338
    assert system.nodes[0].capacity == (2,)
    assert system.max_time_limit == 64800


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"MaxNodes": "100"}, "not give MaxProcs"),
        ({"MaxProcs": "100"}, "not give MaxNodes"),
        ({}, "MaxProcs and MaxNodes"),
        ({"MaxNodes": "5544", "MaxProcs": "93312"}, "not a multiple"),
        ({"MaxNodes": "0", "MaxProcs": "0"}, ">= 1"),
    ],
)
def test_header_machine_refusals(fields: dict[str, str], why: str) -> None:
    with pytest.raises(TraceError, match=why) as info:
        system_from_header(header(**fields), "trace.swf")
    message = str(info.value)
    assert "--system" in message
    assert "systems/" in message
    assert "trace.swf" in message
