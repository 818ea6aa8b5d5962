"""Model building in bulk, on the CP-SAT proto, for the models' widest parts.

CP-SAT's Python builders cost a few microseconds per call: ``new_int_var`` builds a
``Domain`` and sets a name (about 5 µs), ``sum`` of variables grows one expression per
term, ``add_decision_strategy`` builds one linear expression per variable (about 14 µs).
PCP3 creates one ``x[i,n]`` per job and host node, about 17,000 a call on CTC's 338
nodes against a 0.2 s deadline: a profile of that replay showed a quarter of its time in
``new_int_var`` alone. Writing the proto's repeated fields directly does the same work
in fewer Python calls; the variables are then wrapped by index, as
``CpModel.get_int_var_from_proto_index`` does. That needs OR-Tools' pybind model
(``IntVar(proto, index)``): 9.15 is what this is tested on and the floor in
``pyproject.toml``; earlier releases' Python-side models keep their own variable list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

if TYPE_CHECKING:  # only for annotations
    from ortools.sat.python.cp_model_helper import DecisionStrategyProto


def new_int_vars(model: cp_model.CpModel, uppers: Sequence[int]) -> list[cp_model.IntVar]:
    """Unnamed variables of domain ``[0, upper]``, one per upper bound, in order."""
    proto = model.proto
    variables = proto.variables
    first = len(variables)
    for upper in uppers:
        variables.add().domain.extend((0, upper))
    return [cp_model.IntVar(proto, index) for index in range(first, first + len(uppers))]


def add_sum_equal(
    model: cp_model.CpModel, variables: Sequence[cp_model.IntVar], total: int
) -> None:
    """``Σ variables == total`` as one linear constraint (distinct plain variables: unlike
    the builders, a repeated variable is not merged into one term)."""
    indices = _plain_indices(variables, "add_sum_equal")
    linear = model.proto.constraints.add().linear
    linear.vars.extend(indices)
    linear.coeffs.extend([1] * len(indices))
    linear.domain.extend((total, total))


def add_strategy(
    model: cp_model.CpModel,
    variables: Sequence[cp_model.IntVar],
    variable_selection: DecisionStrategyProto.VariableSelectionStrategy,
    value_selection: DecisionStrategyProto.DomainReductionStrategy,
) -> None:
    """``model.add_decision_strategy`` with the strategy's variables by index (plain
    variables only). PCP3's allocation strategy on CTC's 338 nodes lists ~17,000
    variables a call, 12% of that replay's time in a profile with the builder. The
    proto's ``variables`` field takes plain variables by index and CP-SAT follows it the
    same way (tested)."""
    strategy = model.proto.search_strategy.add()
    strategy.variables.extend(_plain_indices(variables, "add_strategy"))
    strategy.variable_selection_strategy = variable_selection
    strategy.domain_reduction_strategy = value_selection


def _plain_indices(variables: Sequence[cp_model.IntVar], caller: str) -> list[int]:
    """The variables' proto indices; a negated literal (index ``-i-1``) has no index of
    its own to write, so it is refused."""
    indices = [var.index for var in variables]
    if any(i < 0 for i in indices):
        raise ValueError(f"{caller} takes plain variables, not negated literals")
    return indices
