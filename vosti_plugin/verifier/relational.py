"""Relational equality of two float element terms (left invocation vs right invocation).

`Checker.eq(a, b, pc)` proves that the left term `a` and the right term `b` are bitwise equal whenever the
path condition `pc` holds, by walking both terms together (floats are uninterpreted: same operation on equal
operands).  Integer side conditions become Z3 obligations:
  * selects and load masks are split into cases, so lanes a mask hides never need equal data;
  * a load needs its coordinates inside a region the precondition makes equal (read-equal-region);
  * reductions pair lane j with lane j (the same order on both sides);
  * loops are aligned iteration by iteration: loop-carried state is proved equal by induction over a set of
    lane templates grown until it is closed (loop-invariant); iterations only one side runs must leave the
    selected state unchanged (masked-noop, decided by the value analysis in `noop.py`).
The first obligation that cannot be discharged raises `Failed` with its name and line.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Optional

import z3

from vosti_plugin.verifier.noop import NoopAnalysis
from vosti_plugin.verifier.report import Obligation
from vosti_plugin.verifier.smt import Prover, free_consts, int_subterms, matched_instances
from vosti_plugin.verifier.spec import Fed, Finite, Point, RegionEq, Slice
from vosti_plugin.verifier.symbolic import LoopInfo, SideResult
from vosti_plugin.verifier.values import (dims_eq, FConst, FFromInt, FLoad, FLoopOut, FOp, FParam, FReduce, FSelect, FState, FTerm,
                             FUndef, describe)

_ids = itertools.count()


class Failed(Exception):
    def __init__(self, ob: Obligation):
        super().__init__(f"{ob.name} at line {ob.line}: {ob.message}")
        self.obligation = ob


@dataclass(frozen=True, eq=False)
class Template:
    """Lanes at which loop-carried `name` is kept equal; None = any lane, the same on both sides."""

    name: str
    left: tuple[Optional[z3.ArithRef], ...]
    right: tuple[Optional[z3.ArithRef], ...]


class _NeedTemplate(Exception):
    def __init__(self, loop: str, template: Template):
        super().__init__(loop)
        self.loop, self.template = loop, template


def _local(e: z3.ExprRef) -> bool:
    return any(n.startswith("_r") or n.startswith("k") or n.startswith("_a") for n in free_consts(e))


def _bindings(bound: tuple, pairs: list, terms: list, limit: int):
    """Values to try for a fact's bound variables: those that match its point indices to the accessed
    coordinates, then tuples of subterms of the coordinates (at most `limit`)."""
    yield from matched_instances(bound, pairs)
    yield from itertools.islice(itertools.product(terms, repeat=len(bound)), limit)


class Checker:
    def __init__(self, prover: Prover, left: SideResult, right: SideResult, facts: list[RegionEq],
                 finite: list[Finite] | None = None, fed: list[Fed] | None = None):
        self.p = prover
        self.L, self.R = left, right
        self.facts = facts
        self.finite_facts = finite or []
        self.fed = fed or []  # R inputs that hold what L stored (a launch that reads the previous one's output)
        self.stored = None  # (tensor, L coords, pc, line) -> the term L stores there; set by check.py
        self.inductive: dict[str, list[Template]] = {}
        self.proved_loops: dict[tuple, list[Template]] = {}
        self.memo: dict = {}
        self.obligations: dict[tuple, Obligation] = {}
        self.noop = NoopAnalysis(prover)
        self._keep: list = []

    # -- bookkeeping ---------------------------------------------------------------------------------
    def ok(self, name: str, line: int, msg: str) -> None:
        self.obligations.setdefault((name, line, msg), Obligation(name, line, "proved", msg))

    def fail(self, name: str, line: int, msg: str) -> Failed:
        return Failed(Obligation(name, line, "failed", msg))

    # -- equality ------------------------------------------------------------------------------------
    def eq(self, a: FTerm, b: FTerm, pc: tuple) -> None:
        key = (a.key, b.key, tuple(c.get_id() for c in pc), tuple(sorted((k, len(v)) for k, v in
                                                                          self.inductive.items())))
        if key in self.memo:
            return
        self._eq(a, b, pc)
        self.memo[key] = (a, b, pc)  # keeps the ASTs (and so their ids) alive

    def _eq(self, a: FTerm, b: FTerm, pc: tuple) -> None:
        if isinstance(a, FSelect) and not isinstance(a.cond, FTerm):
            for c, br in ((a.cond, a.a), (z3.Not(a.cond), a.b)):
                if self.p.possible(pc + (c,)):
                    self.eq(br, b, pc + (c,))
            return
        if isinstance(b, FSelect) and not isinstance(b.cond, FTerm):
            for c, br in ((b.cond, b.a), (z3.Not(b.cond), b.b)):
                if self.p.possible(pc + (c,)):
                    self.eq(a, br, pc + (c,))
            return
        if isinstance(b, FLoad) and b.side == "R" and any(f.tensor == b.tensor for f in self.fed):
            return self.eq_fed(a, b, pc)
        if isinstance(a, FLoad) and isinstance(b, FLoad) and a.side == b.side:
            return self.eq_same_load(a, b, pc)
        if isinstance(a, FLoad) and isinstance(b, FLoad):
            return self.eq_load(a, b, pc)
        if isinstance(a, FLoad) and a.mask is not None and not self.p.possible(pc + (a.mask,)):
            return self.eq(a.other or FUndef("masked load", a.line), b, pc)
        if isinstance(b, FLoad) and b.mask is not None and not self.p.possible(pc + (b.mask,)):
            return self.eq(a, b.other or FUndef("masked load", b.line), pc)
        if type(a) is not type(b):
            raise self.mismatch(a, b)
        if isinstance(a, FConst):
            if not a.same_value(b):
                raise self.fail("same-operation", a.line or b.line,
                                f"constants differ: {a.value!r} (left) vs {b.value!r} (right)")
            return
        if isinstance(a, FUndef):
            raise self.fail("read-equal-region", a.line, f"{a.what}: the value is undefined")
        if isinstance(a, FParam):
            if a.name != b.name or a.side != "both" or b.side != "both":
                raise self.fail("contract", a.line, f"float parameter {a.name} must be listed in `same`")
            return
        if isinstance(a, FFromInt):
            if not self.p.valid(a.value == b.value, pc):
                raise self.fail("guard-agreement", a.line or b.line,
                                f"integer converted to float differs: {a.value} vs {b.value}")
            self.ok("guard-agreement", a.line, "integer operands agree")
            return
        if isinstance(a, FSelect):  # float predicates on both sides
            if not isinstance(b.cond, FTerm):
                raise self.mismatch(a, b)
            self.eq(a.cond, b.cond, pc)
            self.eq(a.a, b.a, pc)
            self.eq(a.b, b.b, pc)
            return
        if isinstance(a, FOp):
            if a.op != b.op or len(a.args) != len(b.args):
                raise self.mismatch(a, b)
            for x, y in zip(a.args, b.args):
                self.eq(x, y, pc)
            return
        if isinstance(a, FReduce):
            if a.op != b.op or not dims_eq(a.extent, b.extent):
                raise self.mismatch(a, b)
            j = a.var
            rng = z3.And(0 <= j, j < a.extent)
            inner = pc + (rng, b.var == j)
            if (a.op == "sum" or a.op.startswith("dot")) and isinstance(a.body, FOp) and isinstance(b.body, FOp) \
                    and a.body.op == b.body.op == "mul":
                self.eq_product(a.body, b.body, inner, 0)
            else:
                self.eq(a.body, b.body, inner)
            return
        if isinstance(a, (FState, FLoopOut)) and a.side == b.side:
            return self.eq_same_side_state(a, b, pc)
        if isinstance(a, FState):
            return self.eq_state(a, b, pc)
        if isinstance(a, FLoopOut):
            return self.eq_loop_out(a, b, pc)
        raise self.mismatch(a, b)  # pragma: no cover

    def eq_product(self, a: FOp, b: FOp, pc: tuple, depth: int) -> None:
        """A product inside a sum/dot whose first factor is exactly 0 on both sides contributes a zero when
        the other factor is finite on each side (a constant, or data the contract declares `finite(...)`);
        garbage (a load outside every declared region, possibly inf or NaN) times 0 is NaN, so then the
        factors are compared.  Trusted: the sign of such a zero term (0 * -x = -0.0) does not change the
        sum, which holds when the sum has a +0 or nonzero term."""
        if self.noop.is_zero(a.args[0], pc) and self.noop.is_zero(b.args[0], pc) \
                and self.finite(a.args[1], "L", pc) and self.finite(b.args[1], "R", pc):
            self.ok("read-equal-region", a.line, "a factor is exactly 0 on both sides (masked) and the other is "
                                                 "finite data; the product is 0")
            return
        if depth < 3:
            c = self.undecided(a.args[0], pc)
            if c is None:
                c = self.undecided(b.args[0], pc)
            if c is not None:
                for cc in (c, z3.Not(c)):
                    if self.p.possible(pc + (cc,)):
                        self.eq_product(a, b, pc + (cc,), depth + 1)
                return
        self.eq(a, b, pc)

    def finite(self, t: FTerm, side: str, pc: tuple) -> bool:
        key = ("finite", t.key, side, tuple(c.get_id() for c in pc))
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = (self._finite(t, side, pc), t, pc)  # keeps the ASTs (their ids) alive
        return hit[0]

    def _finite(self, t: FTerm, side: str, pc: tuple) -> bool:
        if isinstance(t, FConst):
            return math.isfinite(float(t.value))
        if isinstance(t, FSelect) and not isinstance(t.cond, FTerm):
            return all(not self.p.possible(pc + (c,)) or self.finite(br, side, pc + (c,))
                       for c, br in ((t.cond, t.a), (z3.Not(t.cond), t.b)))
        if isinstance(t, FOp) and t.op in ("cast:float32", "cast:float64"):  # widening casts are exact
            return self.finite(t.args[0], side, pc)
        if isinstance(t, FLoad):
            m = t.mask
            on = pc + ((m,) if m is not None else ())
            if (m is None or self.p.possible(on)) and not any(
                    self.covers_one(f, t.coords, on) for f in self.finite_facts
                    if f.tensor == t.tensor and f.side == side):
                return False
            if m is not None and self.p.possible(pc + (z3.Not(m),)):
                return t.other is not None and self.finite(t.other, side, pc + (z3.Not(m),))
            return True
        return False

    def covers_one(self, fact, coords: tuple, pc: tuple) -> bool:
        """Do `coords` lie in the region of a one-sided fact (`finite(...)`)?"""
        def goal_for(sub: list) -> z3.BoolRef:
            s = (lambda e: z3.substitute(e, *sub)) if sub else (lambda e: e)
            parts = [s(fact.cond)]
            for c, ix in zip(coords, fact.index):
                parts.append(c == s(ix.at) if isinstance(ix, Point) else z3.And(s(ix.lo) <= c, c < s(ix.hi)))
            return z3.And(*parts)
        if not fact.bound:
            return self.p.valid(goal_for([]), pc)
        pairs = [(ix.at, c) for ix, c in zip(fact.index, coords) if isinstance(ix, Point)]
        return any(self.p.valid(goal_for(list(zip(fact.bound, combo))), pc)
                   for combo in _bindings(fact.bound, pairs, int_subterms(list(coords))[:12], 100))

    def undecided(self, t: FTerm, pc: tuple, budget: list | None = None):
        budget = budget if budget is not None else [40]
        budget[0] -= 1
        if budget[0] < 0:
            return None
        if isinstance(t, FSelect):
            if not isinstance(t.cond, FTerm):
                if self.p.possible(pc + (t.cond,)) and self.p.possible(pc + (z3.Not(t.cond),)):
                    return t.cond
            for x in (t.a, t.b):
                c = self.undecided(x, pc, budget)
                if c is not None:
                    return c
        if isinstance(t, FOp):
            for x in t.args:
                c = self.undecided(x, pc, budget)
                if c is not None:
                    return c
        return None

    def mismatch(self, a: FTerm, b: FTerm) -> Failed:
        return self.fail("same-operation", a.line or b.line,
                         f"left computes {describe(a)} but right computes {describe(b)}")

    # -- one launch reading another's output --------------------------------------------------------
    def eq_fed(self, a: FTerm, b: FLoad, pc: tuple) -> None:
        """b: R's load of an element that a `fed(L.T[...], R.T[...])` fact says holds L's stored value; a is
        compared with the term L stores there (L's only writer of that element, proved by `stored`)."""
        m = b.mask if b.mask is not None else z3.BoolVal(True)
        if self.p.possible(pc + (z3.Not(m),)):
            self.eq(a, b.other or FUndef("masked load", b.line), pc + (z3.Not(m),))
        on = pc + (m,)
        if not self.p.possible(on):
            return
        coords = self.fed_coords(b, on)
        if coords is None or self.stored is None:
            raise self.fail("read-equal-region", b.line, f"the load of {b.tensor} may read elements that no "
                                                         f"`fed(L.{b.tensor}[...], R.{b.tensor}[...])` fact covers")
        self.eq(a, self.stored(b.tensor, coords, on, b.line), on)
        self.ok("read-equal-region", b.line, f"load of {b.tensor} reads what the left launch stored there")

    def fed_coords(self, b: FLoad, pc: tuple):
        """L's coordinates of the element R's load b reads, from the first fed fact that covers it."""
        for fact in self.fed:
            if fact.tensor != b.tensor:
                continue
            pairs = [(ix.at, c) for ix, c in zip(fact.right, b.coords)]
            combos = _bindings(fact.bound, pairs, int_subterms(list(b.coords))[:12], 200) if fact.bound else [()]
            for combo in combos:
                sub = list(zip(fact.bound, combo))
                s = (lambda e: z3.substitute(e, *sub)) if sub else (lambda e: e)
                goal = z3.And(s(fact.cond), *[c == s(ix.at) for ix, c in zip(fact.right, b.coords)])
                if self.p.valid(goal, pc):
                    return tuple(s(ix.at) for ix in fact.left)
        return None

    def eq_same_load(self, a: FLoad, b: FLoad, pc: tuple) -> None:
        """Two loads of one launch: the same element under the same mask."""
        ma = a.mask if a.mask is not None else z3.BoolVal(True)
        mb = b.mask if b.mask is not None else z3.BoolVal(True)
        if a.tensor != b.tensor or not self.p.valid(z3.And(ma == mb, z3.Implies(ma, z3.And(
                *[x == y for x, y in zip(a.coords, b.coords)]))), pc):
            raise self.mismatch(a, b)
        if self.p.possible(pc + (z3.Not(ma),)):
            self.eq(a.other or FUndef("masked load", a.line), b.other or FUndef("masked load", b.line),
                    pc + (z3.Not(ma),))

    def eq_same_side_state(self, a, b, pc: tuple) -> None:
        """Two terms of one launch naming loop state: the same loop, variable and lanes, at the one
        iteration the launch's symbolic execution is at (both sides' terms share its loop counters)."""
        if a.loop != b.loop or a.name != b.name or type(a) is not type(b) or not self.p.valid(
                z3.And(*[x == y for x, y in zip(a.lanes, b.lanes)]), pc):
            raise self.mismatch(a, b)

    # -- loads ---------------------------------------------------------------------------------------
    def eq_load(self, a: FLoad, b: FLoad, pc: tuple) -> None:
        if a.tensor != b.tensor:
            raise self.mismatch(a, b)
        ma = a.mask if a.mask is not None else z3.BoolVal(True)
        mb = b.mask if b.mask is not None else z3.BoolVal(True)
        if self.p.possible(pc + (ma, mb)):
            self.read_equal(a, b, pc + (ma, mb))
        if self.p.possible(pc + (z3.Not(ma), z3.Not(mb))):
            self.eq(a.other or FUndef("masked load", a.line), b.other or FUndef("masked load", b.line),
                    pc + (z3.Not(ma), z3.Not(mb)))
        if self.p.possible(pc + (ma != mb,)):
            raise self.fail("guard-agreement", a.line,
                            f"the mask of the load of {a.tensor} differs between the invocations")
        self.ok("guard-agreement", a.line, f"load mask of {a.tensor} agrees")

    def read_equal(self, a: FLoad, b: FLoad, pc: tuple) -> None:
        for fact in self.facts:
            if fact.tensor != a.tensor:
                continue
            if self.region_covers(fact, a.coords, b.coords, pc):
                self.ok("read-equal-region", a.line, f"load of {a.tensor} reads {fact.text}")
                return
        inside = any(self.left_inside(f, a.coords, pc) for f in self.facts if f.tensor == a.tensor)
        if inside:
            raise self.fail("read-equal-region", a.line,
                            f"the load of {a.tensor} may read different elements in the two invocations "
                            f"(the selected output depends on it, and the elements do not correspond)")
        raise self.fail("read-equal-region", a.line,
                        f"the load of {a.tensor} may read elements that the precondition does not make equal "
                        f"(outside every `L.{a.tensor}[...] == R.{a.tensor}[...]` region)")

    def left_inside(self, fact: RegionEq, cl: tuple, pc: tuple) -> bool:
        if fact.bound:
            return False
        parts = [fact.cond]
        for d, ix in enumerate(fact.left):
            parts.append(cl[d] == ix.at if isinstance(ix, Point) else z3.And(ix.lo <= cl[d], cl[d] < ix.hi))
        return self.p.valid(z3.And(*parts), pc)

    def region_covers(self, fact: RegionEq, cl: tuple, cr: tuple, pc: tuple) -> bool:
        def goal_for(sub: list) -> z3.BoolRef:
            parts = [z3.substitute(fact.cond, *sub) if sub else fact.cond]
            li, ri = iter(fact.left), iter(fact.right)
            rslices = [i for i in fact.right if isinstance(i, Slice)]
            lslices = [i for i in fact.left if isinstance(i, Slice)]
            offs = []
            for d, ix in enumerate(fact.left):
                s = (lambda e: z3.substitute(e, *sub)) if sub else (lambda e: e)
                if isinstance(ix, Point):
                    parts.append(cl[d] == s(ix.at))
                else:
                    parts.append(z3.And(s(ix.lo) <= cl[d], cl[d] < s(ix.hi)))
                    offs.append(cl[d] - s(ix.lo))
            oi = iter(offs)
            for d, ix in enumerate(fact.right):
                s = (lambda e: z3.substitute(e, *sub)) if sub else (lambda e: e)
                if isinstance(ix, Point):
                    parts.append(cr[d] == s(ix.at))
                else:
                    parts.append(cr[d] == s(ix.lo) + next(oi))
            del li, ri, rslices, lslices
            return z3.And(*parts)

        if not fact.bound:
            return self.p.valid(goal_for([]), pc)
        pairs = [(ix.at, c) for side, coords in ((fact.left, cl), (fact.right, cr))
                 for ix, c in zip(side, coords) if isinstance(ix, Point)]
        cands = int_subterms(list(cl) + list(cr))
        if len(fact.bound) > 1:
            cands = cands[:12]
        return any(self.p.valid(goal_for(list(zip(fact.bound, combo))), pc)
                   for combo in _bindings(fact.bound, pairs, cands, 200))

    # -- loops ---------------------------------------------------------------------------------------
    def loops(self, loop_id: str) -> tuple[LoopInfo, LoopInfo]:
        return self.L.loops[loop_id], self.R.loops[loop_id]

    def instantiate(self, t: Template, shape: tuple[int, ...]) -> tuple[tuple, tuple, tuple]:
        left, right, extra = [], [], []
        for ax, (x, y) in enumerate(zip(t.left, t.right)):
            if x is None:
                v = z3.Int(f"_a{next(_ids)}")
                left.append(v)
                right.append(v)
                extra.append(z3.And(0 <= v, v < shape[ax]))
            else:
                left.append(x)
                right.append(y)
        return tuple(left), tuple(right), tuple(extra)

    def eq_state(self, a: FState, b: FState, pc: tuple) -> None:
        if a.loop != b.loop or a.name != b.name:
            raise self.mismatch(a, b)
        if a.loop in self.inductive:
            templates = self.inductive[a.loop]
            opts = []
            for t in templates:
                if t.name != a.name:
                    continue
                conj = []
                for ax, (x, y) in enumerate(zip(t.left, t.right)):
                    conj.append(a.lanes[ax] == b.lanes[ax] if x is None else
                                z3.And(a.lanes[ax] == x, b.lanes[ax] == y))
                opts.append(z3.And(*conj))
            if opts and self.p.valid(z3.Or(*opts), pc):
                return
            left = tuple(None if _local(x) or _local(y) else x for x, y in zip(a.lanes, b.lanes))
            right = tuple(None if l is None else y for l, y in zip(left, b.lanes))
            raise _NeedTemplate(a.loop, Template(a.name, left, right))
        # a loop state read outside its own induction (a store inside the loop): same iteration on both sides
        la, lb = self.loops(a.loop)
        if not self.p.valid(la.k == lb.k, pc):
            raise self.fail("loop-range", la.line, "a store inside the loop happens at different iterations")
        if not self.p.valid(la.start == lb.start, pc):
            raise self.fail("loop-range", la.line, "the loop starts at different iterations")
        outer = tuple(c for c in pc if not ({str(la.k), str(lb.k)} & free_consts(c)))
        self.prove_invariant(a.loop, [Template(a.name, a.lanes, b.lanes)], outer)

    def prove_invariant(self, loop_id: str, initial: list[Template], pc: tuple) -> list[Template]:
        la, lb = self.loops(loop_id)
        templates = list(initial)
        for _round in range(10):
            self.inductive[loop_id] = templates
            try:
                for t in list(templates):
                    if t.name not in la.carried or t.name not in lb.carried:
                        raise self.fail("same-operation", la.line, f"{t.name} is not carried by both loops")
                    (ia, na), (ib, nb) = la.carried[t.name], lb.carried[t.name]
                    lanes_a, lanes_b, extra = self.instantiate(t, ia.shape)
                    base_pc = pc + extra
                    self.eq(ia.at(lanes_a), ib.at(lanes_b), base_pc)
                    step_pc = pc + extra + (la.k == lb.k, la.in_range(), lb.in_range(), la.alive, lb.alive)
                    if self.p.possible(step_pc):
                        self.eq(na.at(lanes_a), nb.at(lanes_b), step_pc)
                self.ok("loop-invariant", la.line,
                        "carried " + ", ".join(sorted({t.name for t in templates})) + " equal at every iteration")
                return templates
            except _NeedTemplate as need:
                if need.loop != loop_id:
                    raise
                templates = templates + [need.template]
            finally:
                self.inductive.pop(loop_id, None)
        raise self.fail("loop-invariant", la.line, "loop-carried state depends on too many lanes to align")

    def eq_loop_out(self, a: FLoopOut, b: FLoopOut, pc: tuple) -> None:
        if a.loop != b.loop or a.name != b.name:
            raise self.mismatch(a, b)
        la, lb = self.loops(a.loop)
        if not dims_eq(la.step, lb.step):
            raise self.fail("loop-range", la.line, "loop steps differ")
        if not self.p.valid((la.start - lb.start) % la.step == 0, pc):
            raise self.fail("loop-range", la.line, "the loops' iterations are not on the same grid")
        ckey = (a.loop, a.name, tuple(x.get_id() for x in a.lanes), tuple(x.get_id() for x in b.lanes),
                tuple(c.get_id() for c in pc))
        templates = self.proved_loops.get(ckey)
        if templates is None:
            templates = self.prove_invariant(a.loop, [Template(a.name, a.lanes, b.lanes)], pc)
            self.proved_loops[ckey] = templates
            self._keep.append((a, b, pc))
        same_range = self.p.valid(z3.And(la.start == lb.start, la.stop == lb.stop), pc)
        if same_range:
            self.ok("loop-range", la.line, "both invocations run the same iterations")
            return
        for s, o, sname in ((la, lb, "left"), (lb, la, "right")):
            only = z3.And(s.in_range(), s.alive, z3.Or(s.k < o.start, s.k >= o.stop, z3.Not(o.alive)))
            if not self.p.possible(pc + (only,)):
                continue
            for t in templates:
                init, nxt = s.carried[t.name]
                lanes_a, lanes_b, extra = self.instantiate(t, init.shape)
                lanes = lanes_a if s is la else lanes_b
                why = self.noop.preserves(nxt.at(lanes), t.name, lanes, s.line, a.loop, pc + extra + (only,))
                if why is not None:
                    if why[2] == "live":  # the extra iteration is not even masked for the selected row
                        raise self.fail("loop-range", s.line,
                                        f"the two invocations run different iterations of this loop and one that "
                                        f"only the {sname} invocation runs may change `{t.name}` (line {why[0]}): "
                                        f"{why[1]}")
                    raise self.fail("masked-noop", why[0] or s.line,
                                    f"an iteration of the loop at line {s.line} that only the {sname} invocation "
                                    f"runs is masked for the selected row but may still change `{t.name}`: "
                                    f"{why[1]}")
        self.ok("loop-range", la.line, "iterations outside the common range are exact no-ops")
        self.ok("masked-noop", la.line, "extra iterations leave " +
                ", ".join(sorted({t.name for t in templates})) + " unchanged")


_ = (math, FParam)
