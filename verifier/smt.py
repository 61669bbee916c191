"""Z3 plumbing: one incremental solver per goal holding the global hypotheses, with cached answers.

`valid(goal, pc)` is True only when Z3 proves it (unknown counts as not proved); `possible(pc)` is False
only when Z3 proves the path impossible (unknown counts as possible).  Both are the conservative answer.
"""
from __future__ import annotations

from typing import Iterable

import z3


class Prover:
    def __init__(self, hyps: Iterable[z3.BoolRef], timeout_ms: int = 3000):
        self.solver = z3.Solver()
        self.solver.set(timeout=timeout_ms)
        self.hyps = list(hyps)
        self.solver.add(*self.hyps)
        self.cache: dict[tuple, tuple] = {}
        self.queries = 0

    def _check(self, formulas: list[z3.BoolRef]) -> z3.CheckSatResult:
        self.queries += 1
        self.solver.push()
        try:
            self.solver.add(*formulas)
            return self.solver.check()
        finally:
            self.solver.pop()

    def valid(self, goal: z3.BoolRef, pc: Iterable[z3.BoolRef] = ()) -> bool:
        pc = tuple(pc)
        key = ("v", goal.get_id(), tuple(c.get_id() for c in pc))
        hit = self.cache.get(key)
        if hit is None:
            g = z3.simplify(goal)
            ans = True if z3.is_true(g) else self._check(list(pc) + [z3.Not(g)]) == z3.unsat
            hit = self.cache[key] = (ans, goal, pc)  # the ASTs stay alive, so their ids are not reused
        return hit[0]

    def possible(self, pc: Iterable[z3.BoolRef]) -> bool:
        pc = tuple(pc)
        key = ("s", tuple(c.get_id() for c in pc))
        hit = self.cache.get(key)
        if hit is None:
            simp = [z3.simplify(c) for c in pc]
            ans = False if any(z3.is_false(c) for c in simp) else self._check(list(pc)) != z3.unsat
            hit = self.cache[key] = (ans, pc)
        return hit[0]

    def unsat_with(self, formulas: Iterable[z3.BoolRef]) -> bool:
        return self._check(list(formulas)) == z3.unsat


def free_consts(e: z3.ExprRef, _cache: dict = {}) -> frozenset[str]:
    """Names of the uninterpreted constants in e (memoized by AST id)."""
    key = e.get_id()
    hit = _cache.get(key)
    if hit is not None:
        return hit[1]
    out: set[str] = set()
    todo, seen = [e], set()
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(x.decl().name())
        elif z3.is_quantifier(x):
            todo.append(x.body())
        elif z3.is_app(x):
            todo.extend(x.children())
    res = frozenset(out)
    if len(_cache) > 200000:
        _cache.clear()
    _cache[key] = (e, res)  # keeping e alive keeps its AST id from being reused
    return res


def int_subterms(es: Iterable[z3.ExprRef], limit: int = 60) -> list[z3.ArithRef]:
    """Integer-sorted subterms of es, outermost first, deduplicated; candidate witnesses for existentials."""
    out, seen = [], set()
    todo = list(es)
    while todo and len(out) < limit:
        x = todo.pop(0)
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_int(x) and not z3.is_int_value(x):
            out.append(x)
        if z3.is_app(x):
            todo.extend(x.children())
    return out
