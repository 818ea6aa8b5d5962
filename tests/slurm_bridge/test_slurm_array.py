"""A held array's pending tasks offered one by one (slurm_array)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cpsched.slurm_bridge.slurm_array import TASKS_OFFERED, array_tasks, task_ids
from tests.slurm_bridge.fakes import held, running


@pytest.mark.parametrize(
    ("tasks", "ids", "throttle"),
    [
        ("1-3", [1, 2, 3], None),
        ("[1-3]", [1, 2, 3], None),
        ("1,3%2", [1, 3], 2),  # squeue's ArrayTaskID and JSON's array_task_string
        ("[1,3%2]", [1, 3], 2),
        ("0-8:4", [0, 4, 8], None),
        ("7", [7], None),
    ],
)
def test_slurms_task_strings(tasks: str, ids: list[int], throttle: int | None) -> None:
    assert task_ids(tasks, 64) == (ids, throttle)


def test_a_huge_array_offers_its_first_tasks_only() -> None:
    ids, _ = task_ids("1-1000000", TASKS_OFFERED)
    assert ids == list(range(1, TASKS_OFFERED + 1))


def test_garbage_is_an_error() -> None:
    with pytest.raises(ValueError, match="cannot read"):
        task_ids("1-3,x", 64)


def test_the_tasks_keep_the_arrays_request_and_its_limit_on_running_tasks() -> None:
    record = held("9")
    running_task = running("9_2", {"n1": 1})
    released_task = replace(held("9_5"), held_for_us=False)  # released, not running yet
    offered = array_tasks(record, "9", "1,3-4,6%3", [running_task, released_task])
    assert [job.id for job in offered] == ["9_1"]  # 3 at once: two taken
    assert offered[0].shape == record.shape and offered[0].held_for_us
    assert [j.id for j in array_tasks(record, "9", "1,3", [])] == ["9_1", "9_3"]
