"""The synthetic workload generator and the unit-request sidecar it writes."""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from cpsched.core import make_dispatcher
from cpsched.errors import ConfigError, TraceError
from cpsched.predictor.accuracy import evaluate
from cpsched.predictor.registry import make_predictor
from cpsched.replay.generate import generate_jobs, write_trace
from cpsched.replay.generate_params import WorkloadParams, load_params
from cpsched.replay.simulator import Simulator
from cpsched.replay.swf import read_swf
from cpsched.replay.swf_sidecar import sidecar_path
from cpsched.replay.system import load_system

REPO = Path(__file__).resolve().parents[2]
EURORA = REPO / "systems" / "eurora.toml"
PARAMS = REPO / "systems" / "workloads" / "eurora.toml"
N = 20000
SEED = 11


@pytest.fixture(scope="module")
def eurora():
    return load_system(EURORA)


@pytest.fixture(scope="module")
def jobs(eurora):
    return generate_jobs(WorkloadParams(), eurora, N, SEED)


@pytest.fixture(scope="module")
def small_trace(eurora, tmp_path_factory):
    params = WorkloadParams()
    made = generate_jobs(params, eurora, 600, SEED)
    out = tmp_path_factory.mktemp("gen") / "eurora.swf"
    write_trace(out, made, params, eurora, SEED)
    return out, made


def share(jobs, name):
    return sum(j.job_class == name for j in jobs) / len(jobs)


def test_the_job_mix_is_eurora_like(jobs):
    # Classes are drawn per burst (mean 6 jobs), so the shares vary more than per job:
    # tolerances are about 3 standard deviations at N = 20,000.
    assert share(jobs, "gpu") == pytest.approx(0.76, abs=0.03)
    assert share(jobs, "cpu") == pytest.approx(0.23, abs=0.03)
    assert 0.004 <= share(jobs, "mic") <= 0.02


def test_run_times_are_short_with_a_heavy_tail(jobs):
    runs = [j.run for j in jobs]
    assert statistics.median(runs) < 600
    assert sum(r < 3600 for r in runs) / len(runs) > 0.85
    assert 1 <= sum(r >= 20 * 3600 for r in runs) <= 0.005 * len(runs)  # a few near 24 h
    assert max(runs) <= 86400
    gpu = statistics.mean(j.run for j in jobs if j.job_class == "gpu")
    cpu = statistics.mean(j.run for j in jobs if j.job_class == "cpu")
    assert gpu < cpu  # GPU jobs are the short ones, as on Eurora


def test_requests_overestimate_and_are_round_values(jobs):
    params = WorkloadParams()
    # A request is a menu value, or the class maximum when the menu's next value is above.
    menu = set(params.time_menu_s) | {c.max_run_s for c in params.classes}
    assert all(j.request >= j.run for j in jobs)
    assert all(j.request in menu for j in jobs)
    assert statistics.median(j.request / j.run for j in jobs) >= 3


def test_submissions_come_in_bursts_and_fill_about_a_month(jobs):
    gaps = [b.submit - a.submit for a, b in itertools.pairwise(jobs)]
    # Burstier than a Poisson stream (coefficient of variation 1).
    assert statistics.pstdev(gaps) / statistics.mean(gaps) > 1.5
    same_user_quick = sum(
        1 for a, b in itertools.pairwise(jobs) if b.submit - a.submit <= 10 and a.user == b.user
    )
    assert same_user_quick / len(gaps) > 0.5
    days = (jobs[-1].submit - jobs[0].submit) / 86400
    assert days == pytest.approx(N * 65 / 86400, rel=0.15)


def test_the_profile_predictor_has_something_to_learn(eurora, tmp_path):
    # Users repeat job families, so history predicts: on Eurora the profile heuristic's
    # error was 40 min against 225-310 min for the requests (Netti 2017, section 3.3).
    params = WorkloadParams()
    write_trace(tmp_path / "w.swf", generate_jobs(params, eurora, 4000, SEED), params, eurora, 1)
    trace = read_swf(tmp_path / "w.swf", eurora)
    profile = evaluate(trace.jobs, make_predictor("profile"))
    walltime = evaluate(trace.jobs, make_predictor("wall-time"))
    assert profile["mae_s"] < 0.5 * walltime["mae_s"]
    names = {tj.job.name for tj in trace.jobs}
    assert len(names) == len(trace.jobs)  # numbered: stem_1, stem_2, ...


def test_same_seed_same_bytes_other_seed_other_bytes(eurora, tmp_path):
    params = WorkloadParams()
    outs = []
    for folder, seed in (("a", 3), ("b", 3), ("c", 4)):
        out = tmp_path / folder / "w.swf"
        write_trace(out, generate_jobs(params, eurora, 500, seed), params, eurora, seed)
        outs.append((out.read_bytes(), sidecar_path(out).read_bytes()))
    assert outs[0] == outs[1]
    assert outs[0][0] != outs[2][0]


def test_gzip_output_is_reproducible_too(eurora, tmp_path):
    params = WorkloadParams()
    made = generate_jobs(params, eurora, 50, 1)
    for folder in ("a", "b"):
        write_trace(tmp_path / folder / "w.swf.gz", made, params, eurora, 1)
    assert (tmp_path / "a/w.swf.gz").read_bytes() == (tmp_path / "b/w.swf.gz").read_bytes()
    assert len(read_swf(tmp_path / "a/w.swf.gz", eurora).jobs) == 50


def test_the_reader_round_trips_the_sidecar(small_trace, eurora):
    out, made = small_trace
    trace = read_swf(out, eurora)
    assert trace.report.kept == len(made)
    assert trace.report.counts["units_from_sidecar"] == len(made)
    names = eurora.resource_names
    by_id = {tj.job.id: tj for tj in trace.jobs}
    for g in made:
        tj = by_id[str(g.number)]
        assert tj.job.units == g.units
        assert tj.job.unit_request == tuple(g.per_unit.get(r, 0) for r in names)
        assert tj.job.name == g.name
        assert tj.run_time == g.run and tj.job.time_limit == g.request


class Recording:
    def __init__(self, inner):
        self.inner, self.name, self.starts = inner, inner.name, []

    def decide(self, snapshot, durations):
        decision = self.inner.decide(snapshot, durations)
        self.starts.extend(decision.starts)
        return decision


@pytest.mark.parametrize("allocator", ["first-fit", "balanced", "priority-weighted"])
def test_gpu_jobs_run_only_on_gpu_nodes(small_trace, eurora, allocator):
    trace = read_swf(small_trace[0], eurora)
    recorder = Recording(make_dispatcher("easy", allocator, plan=False))
    Simulator(eurora, trace.jobs, recorder, make_predictor("wall-time")).run()
    gpu = eurora.resource_names.index("gpu")
    wants_gpu = {tj.job.id for tj in trace.jobs if tj.job.unit_request[gpu]}
    assert wants_gpu
    gpu_nodes = {i for i, n in enumerate(eurora.nodes) if n.capacity[gpu]}
    on_gpu = [s for s in recorder.starts if s.job_id in wants_gpu]
    assert len(on_gpu) == len(wants_gpu)
    assert all(node in gpu_nodes for s in on_gpu for node, _ in s.allocation)


def test_without_gpus_gpu_jobs_are_skipped_not_crammed(small_trace):
    out, made = small_trace
    cpu_only = load_system(REPO / "systems" / "forhlr2.toml")  # GPUs but no MICs
    trace = read_swf(out, cpu_only)
    mic_jobs = sum(g.job_class == "mic" for g in made)
    assert trace.report.counts["exceeds_machine"] == mic_jobs
    assert trace.report.kept == len(made) - mic_jobs


def write_pair(tmp_path, sidecar_lines, procs=4):
    swf = tmp_path / "t.swf"
    swf.write_text(f"1 0 -1 100 {procs} -1 -1 {procs} 200 -1 1 1 1 1 1 1 -1 -1\n")
    sidecar_path(swf).write_text("\n".join(sidecar_lines) + "\n")
    return swf


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["job_id,units,cpu,gpu", "1,2,2"], r"t\.swf\.gres\.csv:2: 3 fields, the header has 4"),
        (["job_id,units,cpu,gpu", "1,2,two,1"], r":2: cpu must be a whole number, got 'two'"),
        (["job_id,units,cpu,gpu", "1,2,2,-1"], r":2: gpu must be >= 0"),
        (["job_id,units,cpu,gpu", "1,0,2,1"], r":2: units and cpu must be >= 1"),
        (["job_id,units,cpu,gpu", "1,2,2,1", "1,2,2,1"], r":3: job 1 already described"),
        (["job_id,cpu,gpu", "1,2,1"], r":1: the header must name job_id, units, cpu"),
        (["job_id,units,cpu,gpu", "1,1,2,1"], r":2: job 1 has 1 units x 2 cpu = 2 processors"),
    ],
)
def test_a_broken_sidecar_line_is_a_clear_error(tmp_path, eurora, lines, message):
    swf = write_pair(tmp_path, lines)
    with pytest.raises(TraceError, match=message):
        read_swf(swf, eurora)


def test_a_broken_sidecar_fails_the_cli_without_a_traceback(tmp_path):
    swf = write_pair(tmp_path, ["job_id,units,cpu,gpu", "1,2,2,x"])
    done = subprocess.run(
        [sys.executable, "-c", "from cpsched.cli import main; main()", "replay", str(swf),
         "--system", str(EURORA), "--out", str(tmp_path / "o"), "--no-plots"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "t.swf.gres.csv:2: gpu must be a whole number" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_trace_without_sidecar_reads_as_before(tmp_path, eurora):
    swf = tmp_path / "t.swf"
    swf.write_text("1 0 -1 100 4 -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\n")
    (tj,) = read_swf(swf, eurora).jobs
    assert (tj.job.units, tj.job.unit_request) == (4, (1, 0, 0, 0))


def test_the_shipped_parameter_file_is_the_built_in_profile():
    assert load_params(PARAMS) == WorkloadParams()


def test_a_parameter_file_can_change_the_mix(tmp_path, eurora):
    custom = tmp_path / "w.toml"
    text = PARAMS.read_text().replace("share = 0.76", "share = 0.10", 1)
    custom.write_text(text.replace("share = 0.23", "share = 0.89", 1))
    made = generate_jobs(load_params(custom), eurora, 5000, 2)
    assert share(made, "cpu") > 0.8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[arrivals]\nmean_interarrival = 5\n", "unknown key"),
        ("[users]\ncount = -3\n", "count must be a non-negative whole number"),
        ('[[classes]]\nname = "x"\nshare = 1.0\n', "units"),
        ("colour = 1\n", "unknown key"),
    ],
)
def test_a_bad_parameter_file_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "w.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_params(path)


def test_a_workload_the_system_cannot_hold_is_refused():
    with pytest.raises(ConfigError, match="asks for gpu, which system 'KTH SP2' does not have"):
        generate_jobs(WorkloadParams(), load_system(REPO / "systems" / "kth.toml"), 10, 1)


def test_the_cli_generates_a_trace_replay_can_read(tmp_path):
    out = tmp_path / "g.swf"
    run = [sys.executable, "-c", "from cpsched.cli import main; main()"]
    done = subprocess.run(
        [*run, "generate", "--system", str(EURORA), "--jobs", "300", "--seed", "5",
         "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "300 jobs" in done.stderr
    replayed = subprocess.run(
        [*run, "replay", str(out), "--system", str(EURORA), "--allocator", "hybrid",
         "--out", str(tmp_path / "r"), "--no-plots"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
