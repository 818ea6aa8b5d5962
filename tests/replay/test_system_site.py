"""System files with partitions and maintenance windows, and replays under them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpsched.core import make_dispatcher
from cpsched.errors import ConfigError
from cpsched.predictor.walltime import WallTime
from cpsched.replay.simulator import Simulator, SimulatorOptions
from cpsched.replay.swf import read_swf
from cpsched.replay.system import load_system

ROOT = Path(__file__).resolve().parents[2]

MACHINE = """
name = "two partitions"
[[nodes]]
group = "a"
count = 2
cpu = 4
[[nodes]]
group = "b"
count = 2
cpu = 4
[[partitions]]
name = "all"
groups = ["a", "b"]
default = true
[[partitions]]
name = "small"
groups = ["b"]
queues = ["2"]
max_time = 1000
[[reservations]]
name = "maintenance"
groups = ["a"]
start = 500
end = 900
"""


def swf_line(number: int, submit: int, run: int, procs: int, limit: int, queue: int) -> str:
    fields = [number, submit, -1, run, procs, -1, -1, procs, limit, -1, 1, 1, 1, 1, queue]
    return " ".join(str(f) for f in [*fields, 1, -1, -1])


@pytest.fixture
def machine(tmp_path: Path) -> Path:
    path = tmp_path / "machine.toml"
    path.write_text(MACHINE)
    return path


def test_partitions_queues_and_reservations_load(machine: Path) -> None:
    system = load_system(machine)
    site = system.rules.site
    assert site.partitions["small"].nodes == frozenset({2, 3})
    assert site.partitions["small"].max_time == 1000
    assert site.reservations[0].nodes == frozenset({0, 1})
    assert system.rules.constraints_for("2").partitions == ("small",)  # type: ignore[union-attr]
    assert system.rules.constraints_for("7").partitions == ("all",)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[[partitions]]\nname = "x"\ngroups = ["zz"]\n', "groups must name node groups"),
        ('[[partitions]]\nname = "all"\ngroups = ["a"]\n', "defined twice"),
        ('[[partitions]]\nname = "x"\ngroups = ["a"]\ncolour = 1\n', "unknown key"),
        ('[[reservations]]\nname = "r"\ngroups = ["a"]\nstart = 9\nend = 9\n', "start < end"),
    ],
)
def test_broken_site_rules_are_refused_with_the_fix(
    tmp_path: Path, extra: str, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MACHINE + extra)
    with pytest.raises(ConfigError, match=message):
        load_system(path)


def test_a_replay_keeps_queues_in_their_partitions_and_nobody_in_the_window(
    machine: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text(
        "\n".join(
            [
                swf_line(1, 0, 100, 4, 200, 2),  # queue 2: small's nodes only
                swf_line(2, 0, 300, 8, 600, 1),  # would run into the window on a: on b
                swf_line(3, 10, 50, 4, 100, 1),  # fits before the window
                swf_line(4, 20, 100, 16, 200, 1),  # the whole machine: after the window
                swf_line(5, 30, 100, 4, 5000, 2),  # over small's max_time: refused
                swf_line(6, 40, 100, 12, 200, 2),  # more than small holds: refused
            ]
        )
        + "\n"
    )
    system = load_system(machine)
    read = read_swf(trace, system)
    assert read.report.counts.get("outside_partitions") == 2
    sim = Simulator(
        system,
        read.jobs,
        make_dispatcher("easy", "first-fit"),
        WallTime(),
        SimulatorOptions(validate=True),  # every decision checked against the rules
    )
    result = sim.run()
    start = dict(zip(result.jobs.job_id, result.jobs.start, strict=True))
    end = dict(zip(result.jobs.job_id, result.jobs.end, strict=True))
    assert start["1"] == 0 and start["3"] < 500
    assert end["3"] <= 500
    assert start["4"] >= 900  # needs group a: only once the window has ended
    assert set(start) == {"1", "2", "3", "4"}


def test_the_shipped_site_example_loads() -> None:
    system = load_system(ROOT / "systems" / "ctc-site.toml")
    assert set(system.rules.site.partitions) == {"batch", "other"}
    assert len(system.rules.site.reservations) == 2
