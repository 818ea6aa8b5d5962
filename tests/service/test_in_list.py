"""IN lists padded to a few lengths: the same rows matched, few statement texts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cpsched.service.store.database import IN_LIST_STEP, in_list


@given(st.lists(st.integers(), max_size=3 * IN_LIST_STEP))
def test_a_padded_in_list_matches_the_same_values(values: list[int]) -> None:
    padded = in_list(values)
    assert set(padded) == set(values)
    assert len(padded) >= len(values)
    assert padded[: len(values)] == values


def test_every_length_up_to_ten_thousand_makes_fifteen_statement_texts() -> None:
    lengths = {len(in_list(list(range(n)))) for n in range(1, 10_001)}
    assert lengths == {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 12_288}
