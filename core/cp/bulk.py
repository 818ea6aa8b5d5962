"""Model building in bulk, on the CP-SAT proto, for the models' widest parts.

CP-SAT's Python builders cost a few microseconds per call: ``new_int_var`` builds a
``Domain`` and sets a name (about 5 µs), ``sum`` of variables grows one expression per
term, ``add_decision_strategy`` builds one linear expression per variable (about 14 µs).
PCP3 creates one ``x[i,n]`` per job and host node, about 17,000 a call on CTC's 338
nodes against a 0.2 s deadline: a profile of that replay showed a quarter of its time in
``new_int_var`` alone. Writing the proto's repeated fields directly (or copying runs of
like variables from cached blocks with ``merge_from``) does the same work in fewer
Python calls; the variables are then wrapped by index, as
``CpModel.get_int_var_from_proto_index`` does. That needs OR-Tools' pybind model
(``IntVar(proto, index)``): 9.15 is what this is tested on and the floor in
``pyproject.toml``; earlier releases' Python-side models keep their own variable list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from itertools import groupby
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

if TYPE_CHECKING:  # only for annotations
    from ortools.sat.python.cp_model_helper import DecisionStrategyProto


class Model(cp_model.CpModel):
    """CP-SAT's model without the pre-PEP 8 aliases: OR-Tools' constructor binds each of
    its ``add_``/``new_``/``clear_`` methods a second time, under its camel-case name and
    wrapped in a deprecation warning, on every model (0.85 ms a model: 5% of a replay of
    CTC under the default, one model per searched call). cpsched calls the PEP 8 names
    only."""

    def _add_pre_pep8_methods(self) -> None:
        pass


def new_int_vars(model: cp_model.CpModel, uppers: Sequence[int]) -> list[cp_model.IntVar]:
    """Unnamed variables of domain ``[0, upper]``, one per upper bound, in order, of
    consecutive indices (``range(xs[0].index, xs[0].index + len(xs))``).

    Runs of one upper bound (a job's hosts of one node kind: all 338 of CTC's) are
    copied in C++ from cached blocks of 2^j such variables, a few ``merge_from`` per run:
    about 0.1 µs a variable against 0.9 µs for ``variables.add()`` and its domain."""
    proto = model.proto
    first = len(proto.variables)
    for upper, run in groupby(uppers):
        count = sum(1 for _ in run)
        while count:
            size = 1 << (count.bit_length() - 1)  # the largest power of two in count
            proto.merge_from(_block(upper, size).proto)
            count -= size
    return [cp_model.IntVar(proto, index) for index in range(first, len(proto.variables))]


@cache
def _block(upper: int, size: int) -> cp_model.CpModel:
    """A model of ``size`` variables of domain ``[0, upper]`` and nothing else (so that
    merging it adds only them); at most 13 sizes per upper bound (2^0 … 2^12: 5,544 hosts
    on Curie). Never modified after it is built: every later model copies from it."""
    block = Model()
    variables = block.proto.variables
    for _ in range(size):
        variables.add().domain.extend((0, upper))
    return block


def add_sum_equal(model: cp_model.CpModel, indices: Sequence[int], total: int) -> None:
    """``Σ variables == total`` over the variables of these proto indices, as one linear
    constraint (distinct variables: unlike the builders, a repeated one is not merged)."""
    linear = model.proto.constraints.add().linear
    linear.vars.extend(indices)
    linear.coeffs.extend([1] * len(indices))
    linear.domain.extend((total, total))


def add_strategy(
    model: cp_model.CpModel,
    indices: Sequence[int],
    variable_selection: DecisionStrategyProto.VariableSelectionStrategy,
    value_selection: DecisionStrategyProto.DomainReductionStrategy,
) -> None:
    """``model.add_decision_strategy`` over the variables of these proto indices. PCP3's
    allocation strategy on CTC's 338 nodes lists ~17,000 variables a call, 12% of that
    replay's time in a profile with the builder. The proto's ``variables`` field takes
    plain variables by index and CP-SAT follows it the same way (tested)."""
    strategy = model.proto.search_strategy.add()
    strategy.variables.extend(indices)
    strategy.variable_selection_strategy = variable_selection
    strategy.domain_reduction_strategy = value_selection


def indices_of(variables: Iterable[cp_model.IntVar]) -> list[int]:
    """The variables' proto indices, for the builders above and the search. A negated
    literal (index ``-i-1``) has no index of its own, so it is refused."""
    indices = [var.index for var in variables]
    if any(i < 0 for i in indices):
        raise ValueError("proto indices are for plain variables, not negated literals")
    return indices
