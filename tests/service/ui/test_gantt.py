"""The Gantt chart: lanes, window, kinds of bars, and what it says to a screen reader."""

from __future__ import annotations

from cpsched.service.ui import gantt
from cpsched.service.ui.gantt import Bar
from cpsched.service.ui.live import LiveView, Placed, PlannedStart


def view(placed, planned=(), nodes=("n1", "n2", "n3")):
    return LiveView(
        time=10_000,
        dispatcher="hcp3",
        fallback=False,
        fallback_reason=None,
        nodes=list(nodes),
        queue=[],
        queued_total=len(planned),
        placed=list(placed),
        planned=list(planned),
    )


def test_overlapping_bars_get_lanes_of_their_own():
    bars = [Bar("a", 0, 10, "running"), Bar("b", 5, 15, "running"), Bar("c", 10, 20, "running")]
    lanes = gantt.pack(bars)
    assert [[b.job_id for b in lane] for lane in lanes] == [["a", "c"], ["b"]]


def test_layout_draws_busy_nodes_and_counts_idle_ones():
    g = gantt.layout(
        view(
            [
                Placed("r1", "u", 9000, 12_000, {"n1": 2, "n3": 1}, False),
                Placed("r2", "u", 5000, 9500, {"n1": 1}, False),  # past its prediction
                Placed("s1", "u", 10_000, 11_000, {"n3": 3}, True),
            ],
            [PlannedStart("p1", 12_000, 13_000), PlannedStart("far", 10_000 + 8 * 86400, 10**7)],
        )
    )
    assert [row.label for row in g.rows] == ["n1", "n3"]
    assert g.idle_nodes == 1
    kinds = {b.job_id: b.kind for row in g.rows for lane in row.lanes for b in lane}
    assert kinds == {"r1": "running", "r2": "overdue", "s1": "starting"}
    overdue = next(b for lane in g.rows[0].lanes for b in lane if b.job_id == "r2")
    assert overdue.end == g.now
    assert overdue.start == g.t0  # began before the window: clipped
    assert [b.job_id for lane in g.planned for b in lane] == ["p1"]
    assert g.hidden_planned == 1
    assert g.t0 < g.now < 13_000 <= g.t1


def test_window_is_at_least_an_hour_and_at_most_a_week():
    assert gantt.window(0, []) == (-900, 3600)
    assert gantt.window(0, [10**9]) == (-7 * 86400 // 4, 7 * 86400)


def test_many_busy_nodes_are_capped():
    nodes = [f"n{i}" for i in range(gantt.MAX_NODE_ROWS + 7)]
    placed = [Placed(f"j{i}", "u", 9000, 11_000, {name: 1}, False) for i, name in enumerate(nodes)]
    g = gantt.layout(view(placed, nodes=nodes))
    assert len(g.rows) == gantt.MAX_NODE_ROWS
    assert g.hidden_nodes == 7


def test_render_escapes_names_and_labels_every_bar():
    hostile = '<script>alert("x")</script>'
    svg = gantt.render(
        gantt.layout(view([Placed(hostile, "u", 9000, 11_000, {"n<1>": 1}, False)], nodes=["n<1>"]))
    )
    assert "<script>" not in svg
    assert "&lt;script&gt;" in svg
    assert svg.count('tabindex="0"') == 1
    assert 'role="img"' in svg
    assert "running, from 1970-01-01 02:30:00 to 1970-01-01 03:03:20 (predicted)" in svg
