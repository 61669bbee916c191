"""Z3 plumbing: one incremental solver per goal holding the global hypotheses, with cached answers.

Queries are bounded by Z3's resource counter (`rlimit`), not by wall-clock time, so a verdict does not
depend on how loaded the machine is.

`valid(goal, pc)` is True only when Z3 proves it (unknown counts as not proved); `possible(pc)` is False
only when Z3 proves the path impossible (unknown counts as possible).  Both are the conservative answer.
Shortcuts only ever produce `sat`, the conservative side of both: a model of an earlier satisfiable query
that also satisfies the new one answers it without a solver call.
"""
from __future__ import annotations

import itertools
from typing import Iterable

import z3


RLIMIT_PER_MS = 2000  # Z3 resource units per millisecond of an unloaded core (measured, roughly)
ESCALATION = 4  # budget multiple of the default-arithmetic solver, asked what the fast one left unknown
MODELS_KEPT = 8  # models of the latest satisfiable queries tried on each new query before a solver call


def new_solver(budget_ms: int, fast_arith: bool = False) -> z3.Solver:
    """fast_arith: Z3's older simplex arithmetic, a third to a half faster on these (mostly linear) queries
    but weaker on non-linear ones; its `unknown` is re-asked with the default solver."""
    s = z3.Solver()
    if fast_arith:
        s.set("smt.arith.solver", 2)
    s.set("rlimit", budget_ms * RLIMIT_PER_MS)
    s.set(timeout=budget_ms * 20)  # a safety net only; the resource limit decides
    return s


class Prover:
    """domain: the finitely many values (one dict per config) of the constexprs kept symbolic.  A query Z3
    cannot decide symbolically (typically non-linear in a block size) is re-asked once per value of the
    symbolic constexprs it mentions, where it is linear."""

    def __init__(self, hyps: Iterable[z3.BoolRef], timeout_ms: int = 3000, domain: list[dict] | None = None):
        self.timeout_ms = timeout_ms
        self.hyps = list(hyps)
        self.cache: dict[tuple, tuple] = {}
        self.queries = 0
        self.domain = domain or []
        self.symbolic = set().union(*[set(d) for d in self.domain]) if self.domain else set()
        self.split_solvers: dict[tuple, z3.Solver] = {}
        self.int_values: dict[tuple, list] = {}
        self.lin_cache: dict[int, tuple] = {}
        self.models: list[z3.ModelRef] = []  # of the latest satisfiable queries of `solver`
        self.domain_items = sorted(self.domain[0].items()) if self.domain else []
        self.domain_keys = {tuple(d[n] for n, _ in self.domain_items) for d in self.domain}
        self.joint: list[z3.BoolRef] = []  # combinations of symbolic values that occur (added as met)
        # one config (a deployment's own geometry): its values written into every term, so Z3 sees constants
        # (x // 7, not a case split on QUERIES_PER_KV): incrementally, a fused prefill chain query for 7 query
        # heads a KV head took 4-35 s as stated, 0.02-0.08 s with the values in; the bindings stay as hypotheses
        self.pinned = [(z3.Bool(n), z3.BoolVal(v)) if isinstance(v, bool) else (z3.Int(n), z3.IntVal(v))
                       for n, v in self.domain_items] if len(self.domain_keys) == 1 else []
        if self.domain:
            self.hyps = [self.linearize(h) for h in self.hyps]
            self.hyps += [x == v for x, v in self.pinned]
            self.hyps += self.joint
            self.joint = []
        self.solver = new_solver(timeout_ms, fast_arith=True)
        self.solver.add(*self.hyps)
        self.fallback: z3.Solver | None = None  # default arithmetic, for what the fast one leaves unknown
        # the quantifier-free hypotheses alone: an unsat answer there is final and much cheaper
        self.light = new_solver(max(1, timeout_ms // 10))
        self.light.add(*[h for h in self.hyps if not has_quantifier(h)])

    def _check(self, formulas: list[z3.BoolRef], reuse_models: bool = True, light: bool = True) -> z3.CheckSatResult:
        self.queries += 1
        if self.domain:
            formulas = [self.linearize(f) for f in formulas]
            if self.joint:  # facts true of every config: stated once, outside the push
                self.hyps += self.joint
                for solver in (self.solver, self.light, self.fallback):
                    if solver is not None:
                        solver.add(*self.joint)
                self.joint = []
                self.models = []
        if reuse_models and self._model_satisfies(formulas):
            return z3.sat
        if light and not any(has_quantifier(f) for f in formulas):
            self.light.push()
            try:
                self.light.add(*formulas)
                if self.light.check() == z3.unsat:
                    return z3.unsat
            finally:
                self.light.pop()
        r = self._ask(self.solver, formulas)
        if r == z3.unknown and self.pinned:
            r = self._ask(self._fresh_fast(), formulas)
        if r == z3.unknown:
            if self.fallback is None:  # a larger budget: costs only where the fast solver could not decide
                self.fallback = new_solver(self.timeout_ms * ESCALATION)
                self.fallback.add(*self.hyps)
            r = self._ask(self.fallback, formulas)
        if r == z3.unknown and self.domain:
            r = self._split(formulas)
        return r

    def _fresh_fast(self) -> z3.Solver:
        """A new fast-arithmetic solver holding the hypotheses only, with a larger budget: what the shared one,
        after many queries, leaves unknown it often decides at once (with one config's values in the terms).
        Still asked incrementally (pushed), as every solver here: a solver asked once runs Z3's preprocessing
        tactics, whose answer near the budget depended on what the process had proved before."""
        s = new_solver(self.timeout_ms * ESCALATION, fast_arith=True)
        s.add(*self.hyps)
        return s

    def _ask(self, solver: z3.Solver, formulas: list[z3.BoolRef]) -> z3.CheckSatResult:
        solver.push()
        try:
            solver.add(*formulas)
            r = solver.check()
            if r == z3.sat:
                self._remember(solver.model())
        finally:
            solver.pop()
        return r

    def _model_satisfies(self, formulas: list[z3.BoolRef]) -> bool:
        """Does a model of an earlier satisfiable query (so of every hypothesis) also satisfy `formulas`?
        Then the query is satisfiable, as Z3 would answer; `sat` is the conservative answer of both
        `valid` and `possible`, so a wrong guess here could only lose a proof, never make one."""
        newest_first = formulas[::-1]  # a path condition's last conjunct is the one most likely false
        return any(all(_true_in(m, f) for f in newest_first) for m in self.models)

    def _remember(self, m: z3.ModelRef) -> None:
        """Keep a model whose symbolic constexprs take the values of one config of the domain."""
        if self.domain_items:
            key = []
            for n, v in self.domain_items:
                x = m.eval(z3.Bool(n) if isinstance(v, bool) else z3.Int(n), model_completion=True)
                key.append(z3.is_true(x) if isinstance(v, bool) else x.as_long() if z3.is_int_value(x) else None)
            if tuple(key) not in self.domain_keys:
                return
        self.models = [m] + self.models[:MODELS_KEPT - 1]

    def linearize(self, e: z3.ExprRef) -> z3.ExprRef:
        """Rewrite every product or division that is non-linear because of a symbolic constexpr into a
        case split over that constexpr's catalog values (If(B == 16, 16 * k, If(B == 32, ...))), so the
        query stays linear and one Z3 call covers every config."""
        key = e.get_id()
        hit = self.lin_cache.get(key)
        if hit is not None:
            return hit[1]
        out = self._lin(e)
        self.lin_cache[key] = (e, out)
        return out

    def _lin(self, e: z3.ExprRef) -> z3.ExprRef:
        if self.pinned:
            return z3.simplify(z3.substitute(e, *self.pinned))
        if z3.is_quantifier(e) or not z3.is_app(e) or e.num_args() == 0:
            return e
        if not (nonlinear_names(e, self.symbolic)):
            return e
        kids = [self.linearize(k) for k in e.children()]
        if (z3.is_mul(e) and sum(1 for k in kids if not z3.is_int_value(k)) >= 2) or \
                ((z3.is_idiv(e) or z3.is_mod(e)) and not z3.is_int_value(kids[1])):
            node = e.decl()(*kids)
            names = sorted({n for k in (kids if z3.is_mul(e) else kids[1:]) for n in free_consts(k)
                            if n in self.symbolic})
            if names:
                vals = self.values_of(tuple(names))
                out = None
                for val in vals:
                    sub = [(z3.Int(n), z3.IntVal(v)) for n, v in zip(names, val)]
                    branch = z3.simplify(z3.substitute(node, *sub))
                    branch = self.linearize(branch) if nonlinear_names(branch, self.symbolic) else branch
                    cond = z3.And(*[z3.Int(n) == v for n, v in zip(names, val)])
                    out = branch if out is None else z3.If(cond, branch, out)
                return out
            return node
        return e.decl()(*kids)

    def values_of(self, names: tuple) -> list:
        """The value tuples of `names` that occur in the domain; a case split over them falls back to the
        first tuple's branch elsewhere, so the disjunction of the tuples becomes a hypothesis."""
        if names not in self.int_values:
            self.int_values[names] = vals = sorted({tuple(d[n] for n in names) for d in self.domain})
            if len(names) > 1:
                self.joint.append(z3.Or(*[z3.And(*[_bind(n, v) for n, v in zip(names, val)]) for val in vals]))
        return self.int_values[names]

    def _split(self, formulas: list[z3.BoolRef], names: list | None = None) -> z3.CheckSatResult:
        if names is None:
            names = sorted({n for f in formulas for n in free_consts(f) if n in self.symbolic})
        if not names:
            return z3.unknown
        keys = sorted({tuple(d[n] for n in names) for d in self.domain})
        unknown = False
        for key in keys:
            sub = [(z3.Bool(n), z3.BoolVal(v)) if isinstance(v, bool) else (z3.Int(n), z3.IntVal(v))
                   for n, v in zip(names, key)]
            sk = (tuple(names), key)
            s = self.split_solvers.get(sk)
            if s is None:
                s = self.split_solvers[sk] = new_solver(self.timeout_ms)
                s.add(*[z3.substitute(h, *sub) for h in self.hyps])
            s.push()
            try:
                s.add(*[z3.substitute(f, *sub) for f in formulas])
                r = s.check()
            finally:
                s.pop()
            if r == z3.sat:
                return z3.sat
            unknown = unknown or r == z3.unknown
        return z3.unknown if unknown else z3.unsat

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
            # straight to the full solver: most paths asked about are feasible, and the light solver's `sat`
            # decides nothing (its hypotheses are a subset), so it would only ask each one twice
            ans = False if any(z3.is_false(c) for c in simp) else self._check(list(pc), light=False) != z3.unsat
            hit = self.cache[key] = (ans, pc)
        return hit[0]

    def contradictory(self) -> bool:
        """Are the hypotheses themselves unsatisfiable?  Here `possible` is the optimistic answer (a vacuous
        proof would follow), so the solver decides, without reusing models."""
        return self._check([], reuse_models=False) == z3.unsat

    def unsat_with(self, formulas: Iterable[z3.BoolRef]) -> bool:
        return self._check(list(formulas)) == z3.unsat


def _true_in(m: z3.ModelRef, f: z3.BoolRef) -> bool:
    v = m.eval(f, model_completion=True)
    return z3.Z3_get_bool_value(v.ctx_ref(), v.as_ast()) == z3.Z3_L_TRUE


def _bind(name: str, value) -> z3.BoolRef:
    return z3.Bool(name) == value if isinstance(value, bool) else z3.Int(name) == value


def _postorder(e: z3.ExprRef, cache: dict, leaf, combine):
    """Bottom-up fold over the DAG of e, each node once (cache: ast id -> (node, value), kept alive)."""
    hit = cache.get(e.get_id())
    if hit is not None:
        return hit[1]
    stack = [(e, False)]
    while stack:
        x, done = stack.pop()
        xid = x.get_id()
        if xid in cache:
            continue
        if z3.is_quantifier(x):
            kids = [x.body()]
        elif z3.is_app(x):
            kids = x.children()
        else:
            kids = []
        if not done:
            pending = [k for k in kids if k.get_id() not in cache]
            if pending:
                stack.append((x, True))
                stack.extend((k, False) for k in pending)
                continue
        cache[xid] = (x, combine(x, [cache[k.get_id()][1] for k in kids]) if kids else leaf(x))
    if len(cache) > 400000:
        val = cache[e.get_id()][1]
        cache.clear()
        return val
    return cache[e.get_id()][1]


_EMPTY: frozenset = frozenset()
_fc_cache: dict = {}
_nl_cache: dict = {}
_q_cache: dict = {}


def clear_term_caches() -> None:
    """Forget the folds below; they are keyed by term id, which is unique within one Z3 context only."""
    _fc_cache.clear()
    _nl_cache.clear()
    _q_cache.clear()


def free_consts(e: z3.ExprRef) -> frozenset[str]:
    """Names of the uninterpreted constants in e."""
    def leaf(x):
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            return frozenset((x.decl().name(),))
        return _EMPTY

    def combine(x, vals):
        out = _EMPTY
        for v in vals:
            if v:
                out = out | v if out else v
        return out

    return _postorder(e, _fc_cache, leaf, combine)


def _tree_sizes(es: list[z3.ExprRef]) -> list[int]:
    """Each term's node count as a tree (a shared subterm counted at each use), each DAG node visited once."""
    cache: dict = {}
    return [_postorder(e, cache, lambda x: 1, lambda x, kids: 1 if z3.is_quantifier(x) else 1 + sum(kids))
            for e in es]


def int_subterms(es: Iterable[z3.ExprRef], limit: int = 60) -> list[z3.ArithRef]:
    """Integer-sorted subterms of es, deduplicated, smallest first (program ids, loop counters and lanes
    before compound terms); candidate witnesses for existentials."""
    terms = _int_subterms(es, limit)
    sizes = _tree_sizes(terms)
    return [t for _, t in sorted(zip(sizes, terms), key=lambda st: st[0])]


def _int_subterms(es: Iterable[z3.ExprRef], limit: int = 60) -> list[z3.ArithRef]:
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


def matched_instances(bound: tuple, pairs: Iterable[tuple]) -> list[tuple]:
    """Values for the bound variables read off by matching each pattern (an index of a quantified fact,
    mentioning the bound variables) against a concrete term of the same shape: `j % P` against
    `(B*k + r) % P` gives j = B*k + r.  Only a guess: the caller proves the instance with Z3."""
    found: dict[int, list] = {v.get_id(): [] for v in bound}

    def match(pat: z3.ExprRef, term: z3.ExprRef) -> None:
        slot = found.get(pat.get_id())
        if slot is not None:
            if z3.is_int(term) and not any(term.eq(x) for x in slot):
                slot.append(term)
            return
        if z3.is_app_of(term, z3.Z3_OP_ITE) and not z3.is_app_of(pat, z3.Z3_OP_ITE):
            match(pat, term.arg(1))
            match(pat, term.arg(2))
            return
        if not (z3.is_app(pat) and z3.is_app(term)) or pat.num_args() == 0 or pat.num_args() != term.num_args() \
                or not pat.decl().eq(term.decl()):
            return
        for a, b in zip(pat.children(), term.children()):
            match(a, b)

    for pat, term in pairs:
        match(pat, term)
    lists = [found[v.get_id()] for v in bound]
    if not all(lists):
        return []
    return list(itertools.islice(itertools.product(*lists), 16))


def nonlinear_names(e: z3.ExprRef, symbolic: set) -> frozenset[str]:
    """Symbolic constexpr names that occur in a product of non-constants or as a divisor in e."""
    if not symbolic:
        return _EMPTY
    key_sym = frozenset(symbolic)
    cache = _nl_cache.setdefault(key_sym, {})

    def leaf(x):
        return _EMPTY

    def combine(x, vals):
        out = _EMPTY
        for v in vals:
            if v:
                out = out | v
        if z3.is_app(x):
            kids = x.children()
            if z3.is_mul(x) and sum(1 for k in kids if not z3.is_int_value(k)) >= 2:
                for k in kids:
                    out = out | (free_consts(k) & key_sym)
            elif (z3.is_idiv(x) or z3.is_mod(x)) and not z3.is_int_value(kids[1]):
                out = out | (free_consts(kids[1]) & key_sym)
        return out

    return _postorder(e, cache, leaf, combine)


def has_quantifier(e: z3.ExprRef) -> bool:
    return _postorder(e, _q_cache, lambda x: False, lambda x, vals: z3.is_quantifier(x) or any(vals))
