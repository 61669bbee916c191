"""One kernel x one config x one goal: frontend -> symbolic sides -> obligations."""
from __future__ import annotations

import ast
import contextlib
import itertools
import time
from typing import Any, Iterator

import z3

from vosti_plugin.verifier import ir, memory, outputs, relational, serial, spec, symbolic
from vosti_plugin.verifier.contracts import Contract, Goal
from vosti_plugin.verifier.frontend import Unsupported
from vosti_plugin.verifier.memory import SIZE_LIMIT, check_read_after_write, check_side_conditions, check_store_bounds
from vosti_plugin.verifier.outputs import OutputGoals
from vosti_plugin.verifier.relational import Checker, Failed
from vosti_plugin.verifier.report import Obligation, ObligationReport
from vosti_plugin.verifier.smt import Prover, clear_term_caches, free_consts
from vosti_plugin.verifier.spec import ContractError, Fed, Finite, Only, RegionEq, SpecParser
from vosti_plugin.verifier.symbolic import SideEvaluator


def _bind(name: str, value) -> tuple:
    if isinstance(value, bool):
        return z3.Bool(name), z3.BoolVal(value)
    return z3.Int(name), z3.IntVal(value)


# the counters that name fresh Z3 constants, restarted with each context (names only need to be unique in one)
_NAME_COUNTERS = ((symbolic, "_fresh"), (relational, "_ids"), (outputs, "_ids"), (memory, "_ids"), (spec, "_bound_ids"))


@contextlib.contextmanager
def fresh_z3_context() -> Iterator[None]:
    """Every term and solver made inside is made in a new Z3 context (z3py's default context, swapped).

    Z3's search order follows its term ids, so in one shared context a proof's answer on a hard query
    (a non-linear coverage goal, say) depends on every term made before it in the process: a control the
    verifier proves alone was rejected after other proofs in the same process.  A context per goal makes
    each verdict a function of the kernel, contract, goal and config alone.  Nothing made inside may be
    used outside (a report holds strings and numbers only), and the counters that name fresh constants
    restart, so the same goal builds the same terms."""
    module = z3.z3
    with serial.LOCK:
        saved = module._main_ctx, [getattr(m, a) for m, a in _NAME_COUNTERS]
        clear_term_caches()
        module._main_ctx = z3.Context()
        for m, a in _NAME_COUNTERS:
            setattr(m, a, itertools.count())
        try:
            yield
        finally:
            clear_term_caches()
            module._main_ctx = saved[0]
            for (m, a), counter in zip(_NAME_COUNTERS, saved[1]):
                setattr(m, a, counter)


def check_goal(kernel: ir.Kernel, contract: Contract, goal: Goal, config: dict[str, Any],
               timeout_ms: int = 3000, domain: list[dict] | None = None,
               right_config: dict[str, Any] | None = None) -> ObligationReport:
    """domain: values of the contract's symbolic constexprs to cover in this one proof (default: the
    config's own values). right_config: a cross-config goal, the right launch's constexprs (the left's are
    `config`); only the names the goal lists in `across` may differ, and none of them may be symbolic."""
    with fresh_z3_context():
        return _check_goal(kernel, contract, goal, config, timeout_ms, domain, right_config)


def _check_goal(kernel: ir.Kernel, contract: Contract, goal: Goal, config: dict[str, Any],
                timeout_ms: int, domain: list[dict] | None, right_config: dict[str, Any] | None = None
                ) -> ObligationReport:
    t0 = time.perf_counter()
    rep = ObligationReport(kernel.name, goal.name, dict(config), "proved", [], 0.0, kernel.filename)
    configs = {"L": config, "R": config if right_config is None else right_config}

    def done(status: str, extra: list[Obligation]) -> ObligationReport:
        rep.status = status
        rep.obligations.extend(extra)
        rep.seconds = time.perf_counter() - t0
        return rep

    same = set(goal.same)
    constexprs = {p.name for p in kernel.params if p.constexpr}
    symbolic = frozenset(contract.symbolic)
    if domain is None:
        domain = [{n: config[n] for n in symbolic if n in config}] if symbolic else []
    domain = [{n: (v if isinstance(v, bool) else int(v)) for n, v in d.items() if n in symbolic} for d in domain]
    names = [p.name for p in kernel.params]
    for n in names:
        spec = contract.param(n)
        if spec is None and n not in constexprs and n not in config:
            pass  # an integer scalar by default
    unknown = [n for n, _ in contract.params if n not in names]
    if unknown:
        return done("failed", [Obligation("contract", kernel.line, "failed",
                                          f"contract names parameters the kernel does not have: {unknown}")])
    differ = sorted(n for n in set(configs["L"]) | set(configs["R"]) if configs["L"].get(n) != configs["R"].get(n))
    if differ:
        outside = [n for n in differ if n not in goal.across or n in symbolic]
        if outside:
            return done("failed", [Obligation("contract", kernel.line, "failed",
                                              f"the two launches' configs differ in {outside}, which goal "
                                              f"{goal.name} does not list in `across` (or keeps symbolic)")])
        rep.config["right"] = {n: configs["R"][n] for n in differ}
    try:
        sides = {s: SideEvaluator(kernel, contract, configs[s], s, same, symbolic).run() for s in ("L", "R")}
    except Unsupported as u:
        return done("unsupported", [Obligation("subset", u.line, "unsupported", u.what)])
    try:
        sp = SpecParser(contract, config, same, names, constexprs, symbolic, configs["R"])
        # with two configs, each launch's constexprs must satisfy the assumptions
        assumed = ([(t, sp.side_clause(t, side)) for t in contract.assume for side in "LR"] if differ
                   else [(t, sp.clause(t)) for t in contract.assume])
        assume = [a for _t, a in assumed]
        pre = assume + [sp.clause(t) for t in goal.pre]
        post = [sp.clause(t) for t in goal.post]
        bounds = [sp.clause(t) for t in contract.bounds]
        grids = {s: tuple(sp.expr(ast.parse(g, mode="eval").body, {}, s) for g in contract.grid) for s in "LR"}
    except (ContractError, SyntaxError, KeyError) as e:
        return done("failed", [Obligation("contract", kernel.line, "failed", str(e))])
    for text, a in assumed:
        # each distinct value tuple of the constexprs the assumption names is checked once (a large domain
        # repeats them: 2304 configs, a handful of tuples per assumption)
        named = sorted(free_consts(a) & set(domain[0])) if domain else []
        seen: set = set()
        for d in domain:
            sub = tuple((n, d[n]) for n in named if n in d)
            if sub in seen:
                continue
            seen.add(sub)
            concrete = z3.simplify(z3.substitute(a, *[_bind(n, v) for n, v in sub])) if sub else z3.simplify(a)
            if not z3.is_true(concrete):
                return done("failed", [Obligation("contract", kernel.line, "failed",
                                                  f"config {d} violates the contract's assumption {text!r}")])
    rep.obligations.append(Obligation("contract", kernel.line, "proved",
                                      "config satisfies the assumptions of the symbolic constexprs"))
    hyps = [c for c in pre if isinstance(c, z3.BoolRef)]
    if domain:  # each symbolic constexpr ranges over its catalog values; `assume` relates them
        for n in sorted(domain[0]):
            vals = sorted({d[n] for d in domain})
            if len(vals) < 2 or not isinstance(vals[0], bool):
                hyps.append(z3.Or(*[a == b for a, b in (_bind(n, v) for v in vals)]))
    pid_bounds = []
    size_facts = [c for c in bounds if isinstance(c, z3.BoolRef)]
    facts = [c for c in pre if isinstance(c, RegionEq)]
    for s in "LR":
        for n in sp.int_symbols():
            hyps.append(sp.side_var(n, s) >= 0)
            size_facts.append(sp.side_var(n, s) < SIZE_LIMIT)  # see memory.py
        for n in sp.stride_symbols():
            size_facts.append(sp.side_var(n, s) >= 0)
        if len(sides[s].pids) > len(grids[s]):
            return done("failed", [Obligation("contract", kernel.line, "failed",
                                              f"the kernel uses {len(sides[s].pids)} program axes, grid has "
                                              f"{len(grids[s])}")])
        for a, g in enumerate(grids[s]):
            p = z3.Int(f"pid{a}@{s}")
            pid_bounds.append(z3.And(0 <= p, p < g))
    base = Prover(hyps + pid_bounds, timeout_ms, domain)
    for s in "LR":
        for name, line, msg, goal_ in sides[s].obligations:
            if not base.valid(goal_):
                return done("failed", [Obligation(name, line, "failed",
                                                  f"cannot prove that {msg}")])
            rep.obligations.append(Obligation(name, line, "proved", msg))
        hyps += sides[s].axioms
    prover = Prover(hyps + pid_bounds, timeout_ms, domain)
    free_pids = Prover(hyps, timeout_ms, domain)  # coverage: program ids are witnesses, not assumptions
    checker = Checker(prover, sides["L"], sides["R"], facts, [c for c in pre if isinstance(c, Finite)],
                      [c for c in pre if isinstance(c, Fed)])
    ev = {s: SideEvaluator(kernel, contract, configs[s], s, same, symbolic) for s in "LR"}
    def hint(side, writer, coords, bound):
        out = []
        env = {f"e{d}": c for d, c in enumerate(coords)}
        env.update({str(b).split("#")[0]: b for b in bound})
        for s_, var, text in goal.witness:
            if s_ != side:
                continue
            val = sp.expr(ast.parse(text, mode="eval").body, env, side)
            if var.startswith("pid"):
                out.append((z3.Int(f"{var}@{side}"), val))
            elif var.startswith("lane"):
                out.append((writer.lanes[int(var[4:])], val))
            else:  # a loop variable of the kernel, by its source name
                for lp in writer.store.loops:
                    if lp.var == var:
                        out.append((lp.k, val))
        return out

    outputs = OutputGoals(prover, checker, sides["L"], sides["R"], grids, {s: ev[s].stride_var for s in "LR"}, hint,
                          free_pids)
    checker.stored = outputs.stored_here
    if prover.contradictory():
        return done("failed", [Obligation("contract", kernel.line, "failed",
                                          "the precondition is contradictory (nothing would be proved)")])
    try:
        sv = ev["L"].stride_var
        # the memory obligations are about the left launch alone: facts naming the right one only slow Z3
        memory = Prover([h for h in hyps + size_facts + pid_bounds
                         if not any(n.endswith("@R") for n in free_consts(h))], timeout_ms, domain)
        # a load of what the launch itself stores is not pre-launch data: settled before the relational goals
        check_read_after_write(prover, sides["L"], grids["L"], sv, checker.ok)
        for clause in post:
            if isinstance(clause, RegionEq):
                outputs.check_equal(clause)
            elif isinstance(clause, Only):
                outputs.check_only(clause)
            else:
                if not prover.valid(clause):
                    raise checker.fail("contract", kernel.line, f"post condition {clause} does not follow")
        # after the relational goals (whose failures say more about a kernel), what they take for granted
        check_side_conditions(memory, sides["L"], grids["L"], sv, checker.ok)
        check_store_bounds(memory, sides["L"], grids["L"], sv, lambda t: sp.shape(t, "L"), checker.ok)
    except Failed as f:
        return done("failed", list(checker.obligations.values()) + [f.obligation])
    except Unsupported as u:
        return done("unsupported", list(checker.obligations.values())
                    + [Obligation("subset", u.line, "unsupported", u.what)])
    return done("proved", list(checker.obligations.values()))
