"""``cpsched compare`` in a terminal: the verdicts, then one table that fits 100 columns
(the whole Markdown, with the job-by-job and per-class tables, is in comparison.md)."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from cpsched.replay.compare import Comparison
from cpsched.replay.compare_table import cell, label

WIDTH = 100
TERMINAL_KEYS = (
    "mean_bounded_slowdown",
    "mean_wait_s",
    "p95_wait_s",
    "max_wait_s",
    "by_length_class.long.mean_wait_s",
    "dispatch_ms_p99",
    "replay_wall_s",
)
"""What a site weighs first: the gain, the tail, and what the decisions cost."""


def comparison_view(comparison: Comparison, baseline: str) -> Group:
    """The verdicts, the table (each cell its value over its ratio to ``baseline``) and
    what each run is."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    table.add_column("run", no_wrap=True)
    for key in TERMINAL_KEYS:
        table.add_column(label(key), justify="right")
    for row in comparison.rows:
        cells = []
        for key in TERMINAL_KEYS:
            value, ratio = cell(row, key)
            cells.append(value if row["run"] == baseline or not ratio else f"{value}\n{ratio}")
        table.add_row(str(row["run"]), *cells)
    verdicts = [Text("• " + line) for line in comparison.verdicts]
    runs = [
        Text.from_markup(f"[bold]{escape(run)}[/]: {escape(words)}")
        for run, words in comparison.descriptions.items()
    ]
    note = Text(f"Ratios (×) are to {baseline}.", style="dim")
    return Group(*verdicts, Text(), table, note, Text(), *runs)


def print_comparison(comparison: Comparison, baseline: str, console: Console) -> None:
    """``comparison`` on ``console``: as wide as the terminal up to :data:`WIDTH`
    columns; :data:`WIDTH` when it is not a terminal (a file, a pipe)."""
    if not console.is_terminal:  # rich would take 80 columns for a file or a pipe
        console = Console(file=console.file, width=WIDTH, no_color=True)
    width = min(WIDTH, console.width)
    console.print(comparison_view(comparison, baseline), width=width, soft_wrap=False)
