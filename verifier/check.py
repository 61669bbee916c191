"""One kernel x one config x one goal: frontend -> symbolic sides -> obligations."""
from __future__ import annotations

import ast
import time
from typing import Any

import z3

from verifier import ir
from verifier.contracts import Contract, Goal
from verifier.frontend import Unsupported
from verifier.outputs import OutputGoals
from verifier.relational import Checker, Failed
from verifier.report import Obligation, ObligationReport
from verifier.smt import Prover
from verifier.spec import ContractError, Only, RegionEq, SpecParser
from verifier.symbolic import SideEvaluator


def check_goal(kernel: ir.Kernel, contract: Contract, goal: Goal, config: dict[str, Any],
               timeout_ms: int = 3000) -> ObligationReport:
    t0 = time.perf_counter()
    rep = ObligationReport(kernel.name, goal.name, dict(config), "proved", [], 0.0, kernel.filename)

    def done(status: str, extra: list[Obligation]) -> ObligationReport:
        rep.status = status
        rep.obligations.extend(extra)
        rep.seconds = time.perf_counter() - t0
        return rep

    same = set(goal.same)
    constexprs = {p.name for p in kernel.params if p.constexpr}
    names = [p.name for p in kernel.params]
    for n in names:
        spec = contract.param(n)
        if spec is None and n not in constexprs and n not in config:
            pass  # an integer scalar by default
    unknown = [n for n, _ in contract.params if n not in names]
    if unknown:
        return done("failed", [Obligation("contract", kernel.line, "failed",
                                          f"contract names parameters the kernel does not have: {unknown}")])
    try:
        sides = {s: SideEvaluator(kernel, contract, config, s, same).run() for s in ("L", "R")}
    except Unsupported as u:
        return done("unsupported", [Obligation("subset", u.line, "unsupported", u.what)])
    try:
        sp = SpecParser(contract, config, same, names, constexprs)
        pre = [sp.clause(t) for t in goal.pre]
        post = [sp.clause(t) for t in goal.post]
        grids = {s: tuple(sp.expr(ast.parse(g, mode="eval").body, {}, s) for g in contract.grid) for s in "LR"}
    except (ContractError, SyntaxError, KeyError) as e:
        return done("failed", [Obligation("contract", kernel.line, "failed", str(e))])
    hyps = [c for c in pre if isinstance(c, z3.BoolRef)]
    facts = [c for c in pre if isinstance(c, RegionEq)]
    for s in "LR":
        for n in sp.int_symbols():
            hyps.append(sp.side_var(n, s) >= 0)
        if len(sides[s].pids) > len(grids[s]):
            return done("failed", [Obligation("contract", kernel.line, "failed",
                                              f"the kernel uses {len(sides[s].pids)} program axes, grid has "
                                              f"{len(grids[s])}")])
        for a, g in enumerate(grids[s]):
            p = z3.Int(f"pid{a}@{s}")
            hyps.append(z3.And(0 <= p, p < g))
    base = Prover(hyps, timeout_ms)
    for s in "LR":
        for name, line, msg, goal_ in sides[s].obligations:
            if not base.valid(goal_):
                return done("failed", [Obligation(name, line, "failed",
                                                  f"cannot prove that {msg} (needed to read the scan's result)")])
            rep.obligations.append(Obligation(name, line, "proved", msg))
        hyps += sides[s].axioms
    prover = Prover(hyps, timeout_ms)
    checker = Checker(prover, sides["L"], sides["R"], facts)
    ev = {s: SideEvaluator(kernel, contract, config, s, same) for s in "LR"}
    outputs = OutputGoals(prover, checker, sides["L"], sides["R"], grids, {s: ev[s].stride_var for s in "LR"})
    if not prover.possible(()):
        return done("failed", [Obligation("contract", kernel.line, "failed",
                                          "the precondition is contradictory (nothing would be proved)")])
    try:
        for clause in post:
            if isinstance(clause, RegionEq):
                outputs.check_equal(clause)
            elif isinstance(clause, Only):
                outputs.check_only(clause)
            else:
                if not prover.valid(clause):
                    raise checker.fail("contract", kernel.line, f"post condition {clause} does not follow")
    except Failed as f:
        return done("failed", list(checker.obligations.values()) + [f.obligation])
    except Unsupported as u:
        return done("unsupported", list(checker.obligations.values())
                    + [Obligation("subset", u.line, "unsupported", u.what)])
    return done("proved", list(checker.obligations.values()))
