"""Random job streams for the wait bound's and today's schedule's property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from cpsched.core import Job
from tests.factories import job

Spec = list[tuple[int, int, int, float]]

jobs_strategy = st.lists(
    st.tuples(
        st.integers(0, 150),  # submit gap
        st.integers(1, 8),  # cores
        st.integers(10, 300),  # limit
        st.floats(0.05, 1.0),  # run time as a share of the limit
    ),
    min_size=5,
    max_size=25,
)
"""Jobs for two 4-core nodes: each fits the idle machine, none runs past its limit."""


def trace_of(spec: Spec) -> tuple[list[Job], dict[str, int]]:
    """The jobs ``spec`` draws, in submission order, and each one's real run time."""
    submit, trace, runtime = 0, [], {}
    for k, (gap, cores, limit, share) in enumerate(spec):
        submit += gap
        trace.append(job(f"j{k}", submit=submit, units=cores, limit=limit))
        runtime[f"j{k}"] = max(1, int(limit * share))
    return trace, runtime
