"""`fed(L.T[...], R.T[...])`: a launch (R) that reads another launch's (L) output, proved against it with
real Z3: R's load resolves to the term L stores there when the L program and loop iteration at hand is that
element's only writer. The shape the fused-vs-split attention proof needs: a fused fold of computed partials
against a fold of stored ones. Each way the composition could be wrong fails."""
import pytest

from vosti_plugin.verifier.check import check_goal
from vosti_plugin.verifier.contracts import contract_of
from vosti_plugin.verifier.frontend import kernel_from_function

from verifier_fed_kernels import fold_kernel

BASE = {"FOLD": False, "PROBE": True, "REVERSE": False, "SCALE": False, "CHUNK": 16}


def _check(goal_name: str, left: dict, right: dict):
    spec = contract_of(fold_kernel)
    goal = next(g for g in spec.verif if g.name == goal_name)
    return check_goal(kernel_from_function(fold_kernel), spec, goal, {**BASE, **left}, right_config={**BASE, **right})


def test_a_fold_of_the_stored_partials_equals_the_fold_of_the_computed_ones():
    rep = _check("fold_of_stored", {}, {"FOLD": True, "PROBE": False})
    assert rep.status == "proved", rep.failure
    assert any(o.name == "read-equal-region" and "left launch stored" in o.message for o in rep.obligations)


@pytest.mark.parametrize("left, right, obligation", [
    ({}, {"FOLD": True, "PROBE": False, "REVERSE": True}, "read-equal-region"),  # folds them in another order
    ({"SCALE": True}, {"FOLD": True, "PROBE": False}, "same-operation"),  # stores a value other than it folds
    ({"PROBE": False}, {"FOLD": True, "PROBE": False}, "coverage"),       # stores nothing
])
def test_a_wrong_composition_fails(left, right, obligation):
    rep = _check("fold_of_stored", left, right)
    assert rep.status == "failed" and rep.failure.name == obligation, rep.failure


def test_without_a_fed_fact_the_stored_input_is_unknown():
    rep = _check("fold_without_fed", {}, {"FOLD": True, "PROBE": False})
    assert rep.status == "failed" and rep.failure.name == "same-operation"
    assert "load w_ptr" in rep.failure.message
