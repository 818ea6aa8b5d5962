"""SWF reading: field mapping, every cleaning rule, headers, compression, limits."""

from __future__ import annotations

import dataclasses
import gzip
import re
from pathlib import Path

import pytest

from cpsched.core.problem import Node
from cpsched.errors import ConfigError, TraceError
from cpsched.replay.swf import (
    RULES,
    SKIP_RULES,
    bad_lines_note,
    malformed_lines,
    read_header,
    read_swf,
)
from cpsched.replay.system import System, system_from_header

TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"

FIELDS = [
    "job", "submit", "wait", "run", "alloc", "cpu", "used_mem", "procs", "req_time",
    "req_mem", "status", "user", "group", "exe", "queue", "partition", "prev", "think",
]  # fmt: skip
DEFAULTS = dict.fromkeys(FIELDS, "-1") | {
    "job": "1",
    "submit": "0",
    "wait": "5",
    "run": "100",
    "alloc": "4",
    "procs": "4",
    "req_time": "200",
    "status": "1",
    "user": "3",
    "group": "2",
    "queue": "1",
}

CPU = System("cpu8", ("cpu",), tuple(Node(f"n{i}", (2,)) for i in range(4)))
MEM = System("mem", ("cpu", "mem", "gpu"), tuple(Node(f"n{i}", (2, 1024, 0)) for i in range(4)))

HEADER = """\
; Version: 2.2
; Computer: IBM SP2
; UnixStartTime: 835823160
; MaxNodes: 338 (batch partition; 512 total)
; MaxProcs: 338
; Note: first note
; Note: second note
;
"""


def line(**fields: object) -> str:
    values = DEFAULTS | {k: str(v) for k, v in fields.items()}
    return " ".join(values[f] for f in FIELDS)


def write(tmp_path: Path, *lines: str, header: str = "", name: str = "t.swf") -> Path:
    text = header + "".join(f"{x}\n" for x in lines)
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_a_clean_line_maps_every_field(tmp_path: Path) -> None:
    trace = read_swf(write(tmp_path, line(job=7, submit=30, exe=12, group=-1)), CPU)
    (tj,) = trace.jobs
    assert tj.run_time == 100
    assert tj.status == 1
    job = tj.job
    assert (job.id, job.submit, job.time_limit, job.units) == ("7", 30, 200, 4)
    assert job.unit_request == (1,)
    assert (job.user, job.group, job.name, job.queue) == ("3", "", "12", "1")
    assert trace.report.lines == trace.report.kept == 1
    assert all(n == 0 for n in trace.report.counts.values())


def test_decimal_times_are_rounded(tmp_path: Path) -> None:
    (tj,) = read_swf(write(tmp_path, line(run="552.21", submit="10.6", cpu="5.5")), CPU).jobs
    assert (tj.run_time, tj.job.submit) == (552, 11)


def test_memory_per_unit_in_mb(tmp_path: Path) -> None:
    trace = read_swf(
        write(
            tmp_path,
            line(job=1, req_mem=1025, used_mem=4096),  # request wins, rounded up to MB
            line(job=2, used_mem=2048),  # no request: used memory
            line(job=3),  # neither known
        ),
        MEM,
    )
    assert [tj.job.unit_request for tj in trace.jobs] == [(1, 2, 0), (1, 2, 0), (1, 0, 0)]
    assert trace.report.counts["mem_from_used"] == 1


SKIPS = [
    ("malformed", "this is not a job line at all"),
    ("malformed", "1 0 5 100 4"),
    ("malformed", line() + " 7"),
    ("malformed", line(run="NaN")),
    ("malformed", line(submit="inf")),
    ("malformed", line(job="1.5")),
    ("malformed", line(think="x")),
    ("malformed", "\ufffd\x00\x01 garbage \ufffd"),
    ("negative_submit", line(submit=-5)),
    ("cancelled_before_start", line(status=5, run=0)),
    ("cancelled_before_start", line(status=5, run=-1)),
    ("no_run_time", line(run=-1)),
    ("no_processors", line(procs=-1, alloc=-1)),
    ("no_processors", line(procs=0, alloc=0)),
    ("exceeds_machine", line(procs=9)),
]


@pytest.mark.parametrize(("rule", "text"), SKIPS)
def test_each_skip_rule_is_counted(tmp_path: Path, rule: str, text: str) -> None:
    trace = read_swf(write(tmp_path, line(job=100, submit=1), text, header=";\n"), CPU)
    report = trace.report
    assert (report.lines, report.kept, report.skipped) == (2, 1, 1)
    assert report.counts[rule] == 1
    assert report.examples[rule] == [3]
    assert sum(report.counts[r] for r in SKIP_RULES) == 1
    assert [tj.job.id for tj in trace.jobs] == ["100"]


def test_duplicate_id_keeps_the_first(tmp_path: Path) -> None:
    trace = read_swf(write(tmp_path, line(job=1, run=10), line(job=1, run=20)), CPU)
    assert [tj.run_time for tj in trace.jobs] == [10]
    assert trace.report.counts["duplicate_id"] == 1
    assert trace.report.examples["duplicate_id"] == [2]


def test_memory_can_exceed_the_machine(tmp_path: Path) -> None:
    mb = 1024  # KB per MB
    lines = [
        line(job=1, procs=1, req_mem=1100 * mb),  # no node has 1100 MB
        line(job=2, procs=5, req_mem=600 * mb),  # one 600 MB unit per node: 4 fit
        line(job=3, procs=4, req_mem=600 * mb),
        line(job=4, procs=8, req_mem=512 * mb),
    ]
    trace = read_swf(write(tmp_path, *lines), MEM)
    assert [tj.job.id for tj in trace.jobs] == ["3", "4"]
    assert trace.report.counts["exceeds_machine"] == 2
    assert trace.report.examples["exceeds_machine"] == [1, 2]


@pytest.mark.parametrize(
    ("rule", "text", "units", "limit", "run"),
    [
        ("zero_run_time", line(run=0, status=0), 4, 200, 1),
        ("procs_from_allocated", line(procs=-1, alloc=3), 3, 200, 100),
        ("no_requested_time", line(req_time=-1, run=70), 4, 70, 70),
        ("no_requested_time", line(req_time=0, run=70), 4, 70, 70),
        ("run_exceeds_request", line(run=300, req_time=200), 4, 200, 300),
    ],
)
def test_each_keep_rule_is_counted(
    tmp_path: Path, rule: str, text: str, units: int, limit: int, run: int
) -> None:
    trace = read_swf(write(tmp_path, text), CPU)
    (tj,) = trace.jobs
    assert (tj.job.units, tj.job.time_limit, tj.run_time) == (units, limit, run)
    assert trace.report.counts[rule] == 1
    assert sum(trace.report.counts.values()) == 1


def test_a_missing_request_becomes_the_systems_maximum(tmp_path: Path) -> None:
    capped = dataclasses.replace(CPU, max_time_limit=3600)
    (tj,) = read_swf(write(tmp_path, line(req_time=-1, run=70)), capped).jobs
    assert (tj.job.time_limit, tj.run_time) == (3600, 70)


def test_report_lists_every_rule_in_order(tmp_path: Path) -> None:
    report = read_swf(write(tmp_path, line()), CPU).report
    assert list(report.counts) == list(RULES) == list(report.examples)
    assert set(SKIP_RULES) < set(RULES)
    assert all(RULES[r].startswith("skip") for r in SKIP_RULES)


def test_examples_are_capped(tmp_path: Path) -> None:
    report = read_swf(write(tmp_path, *(["junk"] * 8)), CPU).report
    assert report.counts["malformed"] == 8
    assert report.examples["malformed"] == [1, 2, 3, 4, 5]


BAD_LINES = [
    line(job=1),
    " ".join(line(job=2).split()[:17]),  # a field short
    line(job=3, req_time="abc"),
    line(job="4.5"),
    line(job=5, procs="nan"),
    line(job=6) + " 7",
    "x" * 100,
    line(job=8),
]


def test_malformed_lines_are_reported_with_their_numbers_and_what_is_wrong(tmp_path):
    trace = read_swf(write(tmp_path, *BAD_LINES, header="; MaxNodes: 4\n"), CPU)
    assert [tj.job.id for tj in trace.jobs] == ["1", "8"]
    assert trace.report.counts["malformed"] == 6
    # The first five, by their line numbers in the file (the header is line 1).
    assert trace.report.malformed == [
        (3, "17 fields, an SWF job line has 18"),
        (4, "field 9 ('abc') is not a number"),
        (5, "job number '4.5' is not a whole number"),
        (6, "field 8 ('nan') is not a finite number"),
        (7, "19 fields, an SWF job line has 18"),
    ]
    cleaning = {"counts": trace.report.counts, "malformed_lines": malformed_lines(trace.report)}
    note = bad_lines_note("t.swf", cleaning)
    assert note == (
        "t.swf: 6 malformed lines left out (line 3: 17 fields, an SWF job line has 18; "
        "line 4: field 9 ('abc') is not a number; line 5: job number '4.5' is not a whole "
        "number; line 6: field 8 ('nan') is not a finite number; line 7: 19 fields, an SWF "
        "job line has 18; and 1 more); --strict stops at the first instead"
    )
    assert bad_lines_note("t.swf", {"counts": {"malformed": 0}, "malformed_lines": []}) is None


def test_a_long_bad_field_is_shortened_in_the_report(tmp_path):
    (bad,) = read_swf(write(tmp_path, "x" * 100), CPU).report.malformed
    assert bad == (1, "field 1 ('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...') is not a number")


def test_strict_stops_at_the_first_malformed_line(tmp_path):
    path = write(tmp_path, *BAD_LINES)
    with pytest.raises(TraceError, match=rf"^{re.escape(str(path))}:2: 17 fields, an SWF job "):
        read_swf(path, CPU, strict=True)
    assert len(read_swf(write(tmp_path, line(job=1), line(job=2)), CPU, strict=True).jobs) == 2


def test_plain_and_gzip_read_the_same(tmp_path: Path) -> None:
    lines = [line(job=i, submit=10 * i) for i in range(1, 6)]
    plain = read_swf(write(tmp_path, *lines, header=HEADER), CPU)
    packed = read_swf(write(tmp_path, *lines, header=HEADER, name="t.swf.gz"), CPU)
    assert plain.jobs == packed.jobs
    assert plain.header == packed.header
    # Sniffed from the content, not the name.
    renamed = tmp_path / "renamed.swf"
    renamed.write_bytes((tmp_path / "t.swf.gz").read_bytes())
    assert read_swf(renamed, CPU).jobs == plain.jobs


def test_jobs_are_sorted_by_submit_then_file_order(tmp_path: Path) -> None:
    lines = [line(job=1, submit=50), line(job=2, submit=10), line(job=3, submit=50)]
    lines.append(line(job=4, submit=10))
    trace = read_swf(write(tmp_path, *lines), CPU)
    assert [tj.job.id for tj in trace.jobs] == ["2", "4", "1", "3"]


def test_limit_keeps_the_first_kept_jobs_in_file_order(tmp_path: Path) -> None:
    lines = [line(job=1, submit=90), "junk", line(job=2, submit=5), line(job=3, submit=1)]
    trace = read_swf(write(tmp_path, *lines), CPU, limit=2)
    assert [tj.job.id for tj in trace.jobs] == ["2", "1"]
    assert (trace.report.lines, trace.report.kept, trace.report.skipped) == (3, 2, 1)
    assert read_swf(write(tmp_path, *lines), CPU, limit=0).jobs == []
    assert len(read_swf(write(tmp_path, *lines), CPU, limit=10).jobs) == 3
    with pytest.raises(ConfigError, match=">= 0"):
        read_swf(write(tmp_path, *lines), CPU, limit=-1)


def test_header_fields(tmp_path: Path) -> None:
    path = write(tmp_path, line(), "; MaxProcs: 999", header=HEADER)
    header = read_header(path)
    assert header.max_nodes == 338
    assert header.max_procs == 338  # a comment after the first job is not header
    assert header.unix_start_time == 835823160
    assert header.fields["MaxNodes"] == "338 (batch partition; 512 total)"
    assert header.fields["Note"] == "first note"
    assert header.fields["Computer"] == "IBM SP2"
    assert read_swf(path, CPU).header == header


def test_no_header(tmp_path: Path) -> None:
    header = read_header(write(tmp_path, line()))
    assert header.fields == {}
    assert (header.max_nodes, header.max_procs, header.unix_start_time) == (None, None, None)


def test_byte_order_mark_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "bom.swf"
    path.write_bytes(b"\xef\xbb\xbf; MaxProcs: 8\r\n" + line().encode() + b"\r\n")
    trace = read_swf(path, CPU)
    assert trace.header.max_procs == 8
    assert trace.report.kept == 1


def test_binary_garbage_is_skipped_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "garbage.swf"
    path.write_bytes(bytes(range(256)) * 4 + b"\n\xff\xfe 1 2 3\n" + line().encode() + b"\n")
    report = read_swf(path, CPU).report
    assert report.kept == 1
    assert report.counts["malformed"] == report.lines - 1 >= 1


def test_unreadable_traces_raise_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot open"):
        read_swf(tmp_path / "missing.swf", CPU)
    with pytest.raises(TraceError, match="cannot open"):
        read_header(tmp_path / "missing.swf")
    truncated = tmp_path / "cut.swf.gz"
    truncated.write_bytes(gzip.compress((line() + "\n").encode() * 1000)[:60])
    with pytest.raises(TraceError, match="cannot read"):
        read_swf(truncated, CPU)


def test_real_kth_trace() -> None:
    path = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"
    if not path.is_file():
        pytest.fail(f"real trace missing: {path} (CI provides ../shared/data/traces)")
    header = read_header(path)
    system = system_from_header(header, path.name)
    trace = read_swf(path, system)
    report = trace.report
    assert report.lines == 27992
    assert report.kept + report.skipped == report.lines
    assert report.skipped == sum(report.counts[r] for r in SKIP_RULES)
    assert report.kept == len(trace.jobs) > 27000
    submits = [tj.job.submit for tj in trace.jobs]
    assert submits == sorted(submits)
    assert max(tj.job.units for tj in trace.jobs) <= 100
