"""The prover's shortcuts never change an answer: reused models only ever answer `sat` (the conservative
side of both `valid` and `possible`), quantified facts are instantiated by matching but each instance is
still proved by Z3, and symbolic constexprs range over the catalog's value combinations only."""
import z3
from hypothesis import given, settings, strategies as st

from vosti_plugin.verifier.smt import Prover, int_subterms, matched_instances

X, Y, Z = z3.Ints("x y z")
_ATOMS = [X < Y, Y < Z, X + Y == Z, X == 2 * Z, Z >= 3, X - Z <= 1, Y % 3 == 1, X >= 0]


def _fresh_answer(hyps, formulas) -> z3.CheckSatResult:
    s = z3.Solver()
    s.add(*hyps, *formulas)
    return s.check()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(range(len(_ATOMS))), st.booleans()), min_size=1, max_size=4),
                min_size=1, max_size=12))
def test_prover_answers_equal_a_fresh_solver_whatever_the_query_order(queries):
    hyps = [X >= -5, Y <= 20]
    p = Prover(hyps)
    for q in queries:
        pc = tuple(_ATOMS[i] if pos else z3.Not(_ATOMS[i]) for i, pos in q)
        assert p.possible(pc) == (_fresh_answer(hyps, pc) != z3.unsat)
        goal, rest = pc[-1], pc[:-1]
        assert p.valid(goal, rest) == (_fresh_answer(hyps, list(rest) + [z3.Not(goal)]) == z3.unsat)


def test_reused_model_never_proves_a_false_goal():
    p = Prover([X >= 0, X <= 10])
    assert p.possible((X == 3,))  # leaves a model with x == 3 behind
    assert not p.valid(X == 3)  # the cached model satisfies x == 3, but x == 4 refutes validity
    assert p.valid(X <= 10) and not p.valid(X <= 9)


def test_matching_reads_the_instance_off_the_term():
    j, k, r, n = z3.Ints("j k r n")
    page = z3.Function("page", z3.IntSort(), z3.IntSort())
    term = (16 * k + r) % n
    found = matched_instances((j,), [(j % n, term), (page(j / n), page((16 * k + r) / n))])
    assert len(found) == 1 and found[0][0].eq(16 * k + r)
    assert matched_instances((j,), [(j % n, (16 * k + r) / n)]) == []  # different operation: no guess


def test_symbolic_constexprs_range_only_over_catalog_combinations():
    a, b = z3.Ints("A B")
    domain = [{"A": 1, "B": 32}, {"A": 2, "B": 16}]
    p = Prover([a * b == 32], domain=domain)
    # holds for both catalog configs; (A, B) = (2, 32) is not one, so it must not be a counterexample
    assert p.valid(z3.Implies(b > 16, a == 1))
    assert not p.valid(a == 1)


def test_contradictory_hypotheses_are_found_even_after_models_were_kept():
    p = Prover([X >= 0, Y >= X])
    assert p.possible((Y == 3,)) and not p.contradictory()
    q = Prover([X >= 0, X < 0])
    assert q.contradictory()


def test_contradictory_precondition_fails_instead_of_proving_vacuously():
    from dataclasses import replace

    from vosti_plugin.verifier.api import verify_kernel
    from vosti_plugin.verifier.contracts import contract_of
    from vosti_plugin.ops import softmax

    goal = contract_of(softmax.mean_kernel).verif[0]
    config = {"BLOCK": 4096}
    assert verify_kernel(softmax.mean_kernel, goal, config).status == "proved"
    report = verify_kernel(softmax.mean_kernel, replace(goal, pre=goal.pre + ("x < 0",)), config)
    assert report.status == "failed" and "contradictory" in report.failure.message, str(report)


def test_one_config_is_written_into_the_terms():
    """A domain of one config (a deployment's own geometry): Z3 is given its values as constants; with two
    configs the symbolic constexpr stays, case-split where it is non-linear."""
    from vosti_plugin.verifier.smt import free_consts

    q = z3.Int("Q")
    one = Prover([X >= 0], domain=[{"Q": 7}])
    assert "Q" not in free_consts(one.linearize(X / q * q <= X))
    assert one.valid(X / q * q <= X) and not one.valid(X / q * q == X) and not one.valid(q == 8)
    two = Prover([X >= 0], domain=[{"Q": 7}, {"Q": 8}])
    assert "Q" in free_consts(two.linearize(X / q * q <= X))
    assert two.valid(X / q * q <= X) and not two.valid(q == 7)


def test_what_the_shared_solver_leaves_unknown_goes_to_a_fresh_fast_one_first(monkeypatch):
    ask = Prover._ask
    monkeypatch.setattr(Prover, "_ask", lambda self, solver, formulas:
                        z3.unknown if solver is self.solver else ask(self, solver, formulas))
    q, i = z3.Int("Q"), z3.Int("i")
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    p = Prover([z3.ForAll([i], f(i) >= 0)], domain=[{"Q": 4}])   # quantified: the light solver cannot refute
    assert p.valid(f(X) / q * q <= f(X)) and not p.valid(f(X) / q * q == f(X))
    assert p.fallback is None   # decided without the default-arithmetic solver


def _tree_size(e: z3.ExprRef) -> int:
    """A term's node count as a tree, by plain recursion (exponential on shared DAGs: small terms only)."""
    return 1 + sum(_tree_size(c) for c in e.children()) if z3.is_app(e) else 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=12))
def test_witness_candidates_come_smallest_tree_first(steps):
    # terms that share subterms (a DAG), as the kernels' index expressions do
    terms = [X, Y, Z]
    for op, a, b in steps:
        u, v = terms[a % len(terms)], terms[b % len(terms)]
        terms.append([u + v, u * v, u - v, z3.If(u > v, u, v)][op])
    found = int_subterms(terms[-3:])
    assert [_tree_size(t) for t in found] == sorted(_tree_size(t) for t in found)
