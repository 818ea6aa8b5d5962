"""``cpsched compare``'s shared charts: written, linked from comparison.md, one colour per
policy; none with --no-plots."""

from __future__ import annotations

import numpy as np
import pytest

from cpsched.replay.compare import compare_policies
from cpsched.replay.compare_plots import (
    CHARTS,
    QueueCurve,
    against_baseline,
    queue_curve,
    smoothed,
)
from cpsched.replay.results import TimeSeries
from cpsched.replay.runner import ReplaySettings
from cpsched.runtime.policy import Policy

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def compared(tmp_path_factory, traces_dir):
    out = tmp_path_factory.mktemp("compare")
    base = ReplaySettings(trace=traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz", out=out, jobs=600)
    policies = {"fcfs": Policy(dispatcher="fcfs"), "easy++": Policy.named("easy++")}
    return out, compare_policies(base, policies, workers=2).markdown


def test_the_charts_are_written_and_linked(compared):
    out, markdown = compared
    for name, title in CHARTS.items():
        assert (out / name).read_bytes().startswith(PNG)
        assert f"[{title}]({name})" in markdown
        assert f"![{title}]({name})" in markdown
    assert markdown == (out / "comparison.md").read_text()
    assert (out / "today" / "jobs.parquet").exists()  # today joined as the baseline


def test_every_policy_is_on_every_chart_in_its_own_colour(compared):
    from matplotlib import colormaps
    from matplotlib.image import imread

    out, _ = compared
    policies = 3  # fcfs, easy++ and today
    for name in CHARTS:
        pixels = imread(out / name)[:, :, :3]
        for i in range(policies):
            colour = np.array(colormaps["tab10"](i)[:3])
            near = np.abs(pixels - colour).max(axis=2) < 0.02
            assert near.sum() > 30, f"{name}: policy {i}'s colour is missing"


def test_no_charts_without_plots(tmp_path, small_trace):
    base = ReplaySettings(trace=small_trace, out=tmp_path, plots=False)
    markdown = compare_policies(base, {"fcfs": Policy(dispatcher="fcfs")}, workers=1).markdown
    assert "## Charts" not in markdown
    assert not list(tmp_path.glob("*.png"))


def test_queue_curve_is_the_time_weighted_mean_per_bin():
    series = TimeSeries(
        time=np.array([0, 10, 20, 40]),
        queue_length=np.array([4, 0, 2, 2], dtype=np.int32),
        used=np.zeros((4, 1), dtype=np.int64),
        resource_names=("cpu",),
        capacity=(1,),
    )
    curve = queue_curve(series, bins=2)
    assert curve.time.tolist() == [10.0, 30.0]
    assert curve.mean.tolist() == [2.0, 2.0]
    empty = queue_curve(
        TimeSeries(np.empty(0), np.empty(0, dtype=np.int32), np.empty((0, 1)), ("cpu",), (1,))
    )
    assert empty.time.size == 0


def test_the_queue_is_smoothed_by_a_centred_moving_average():
    spiky = np.array([0.0, 0.0, 9.0, 0.0, 0.0, 3.0, np.nan, 3.0])
    assert smoothed(spiky, window=3).tolist() == pytest.approx(
        [0.0, 3.0, 3.0, 3.0, 1.0, 1.5, 3.0, 3.0]  # the ends and NaN: fewer values averaged
    )
    assert smoothed(np.array([5.0, 7.0]), window=25).tolist() == [5.0, 7.0]  # too short
    assert smoothed(np.empty(0)).size == 0


def test_a_policys_queue_is_drawn_against_todays_at_todays_bins():
    today = QueueCurve(np.array([10.0, 20.0, 30.0, 40.0]), np.array([4.0, 4.0, 6.0, 6.0]))
    shorter = QueueCurve(np.array([10.0, 20.0, 30.0]), np.array([1.0, 1.0, 1.0]))
    diff = against_baseline(shorter, today)
    assert diff[:3].tolist() == pytest.approx(
        [1 - 4, 1 - 14 / 3, 1 - 16 / 3]  # today smoothed over 3 bins
    )
    assert np.isnan(diff[3])  # its run had ended
    assert np.isnan(against_baseline(QueueCurve(np.empty(0), np.empty(0)), today)).all()
