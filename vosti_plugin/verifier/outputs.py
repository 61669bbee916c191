"""Goals on outputs: the selected output region is equal in both invocations, and stores stay in frame.

For `L.o[sel] == R.o[sel']` every selected element e (free variables) needs, on each side,
  * coverage: some program, lane (and loop iteration) stores to e with its mask and guard true;
  * write-race: no two (program, lane, iteration, store) pairs store to e;
  * value: for any left writer and right writer of e, the stored terms are equal (relational.Checker).
For `only(L.T[region])`: every store to T of that invocation lands inside the region (write-frame).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import z3

from vosti_plugin.verifier.relational import Checker, Failed
from vosti_plugin.verifier.report import Obligation
from vosti_plugin.verifier.smt import Prover, free_consts, int_subterms
from vosti_plugin.verifier.spec import Only, Point, RegionEq, Slice
from vosti_plugin.verifier.symbolic import SideResult, StoreInfo
from vosti_plugin.verifier.values import FTerm, Lin

_ids = itertools.count()


@dataclass(eq=False)
class Writer:
    store: StoreInfo
    lanes: tuple
    vars: list  # pids, lanes, loop counters
    hit_any: z3.BoolRef  # the store executes for these vars (guard, mask, ranges)
    coords: tuple


def make_writer(s: StoreInfo, pids: tuple, grid: tuple, stride_var) -> Writer:
    lanes = tuple(z3.Int(f"_w{next(_ids)}_{a}") for a in range(len(s.shape)))
    parts = [z3.And(0 <= l, l < n) for l, n in zip(lanes, s.shape)]
    parts += [z3.And(0 <= p, p < g) for p, g in zip(pids, grid)]
    parts += [lp.in_range() for lp in s.loops]
    parts.append(s.guard)
    if s.mask is not None:
        m = s.mask.at(lanes)
        parts.append(m if isinstance(m, z3.BoolRef) else m.to_z3(stride_var) != 0)
    ptr = s.ptr.at(lanes)
    vs = list(pids) + list(lanes) + [lp.k for lp in s.loops]
    return Writer(s, lanes, vs, z3.And(*parts), ptr.coords)


def renamed(w: Writer, axioms: list) -> tuple[Writer, list]:
    """A second, independent writer: program ids, lanes, loop counters and the program's scan counts
    renamed, with the scan axioms restated for the copy."""
    scans = sorted({n for a in axioms for n in free_consts(a) if n.startswith("_count")})
    olds = list(w.vars) + [z3.Int(n) for n in scans]
    fresh = [z3.Int(f"{v}'{next(_ids)}") for v in olds]
    sub = list(zip(olds, fresh))
    return (Writer(w.store, tuple(z3.substitute(l, *sub) for l in w.lanes), fresh[:len(w.vars)],
                   z3.substitute(w.hit_any, *sub), tuple(z3.substitute(c, *sub) for c in w.coords)),
            [z3.substitute(a, *sub) for a in axioms])


def region_elements(idx: tuple, tag: str) -> tuple[tuple, list]:
    coords, rng = [], []
    for d, ix in enumerate(idx):
        if isinstance(ix, Point):
            coords.append(ix.at)
        else:
            e = z3.Int(f"_e{tag}{next(_ids)}_{d}")
            coords.append(e)
            rng.append(z3.And(ix.lo <= e, e < ix.hi))
    return tuple(coords), rng


class OutputGoals:
    def __init__(self, prover: Prover, checker: Checker, left: SideResult, right: SideResult,
                 grids: dict[str, tuple], stride_vars: dict, hint=None, free_pids: Prover | None = None):
        self.p, self.ch = prover, checker
        self.sides = {"L": left, "R": right}
        self.grids = grids
        self.stride_vars = stride_vars
        self.hint = hint  # (side, writer, element coords, bound vars) -> [(var, value)]
        self.free_pids = free_pids or prover

    def writers(self, side: str, tensor: str) -> list[Writer]:
        res = self.sides[side]
        pids = tuple(z3.Int(f"pid{a}@{side}") for a in range(len(self.grids[side])))
        return [make_writer(s, pids, self.grids[side], self.stride_vars[side]) for s in res.stores
                if s.tensor == tensor]

    def check_equal(self, goal: RegionEq) -> None:
        ch = self.ch
        el, rng = region_elements(goal.left, "L")
        # right coordinates: slices paired in order with the same offset
        er, offs = [], iter([e - ix.lo for e, ix in zip(el, goal.left) if isinstance(ix, Slice)])
        for ix in goal.right:
            er.append(ix.at if isinstance(ix, Point) else ix.lo + next(offs))
        er = tuple(er)
        region = tuple([goal.cond] + rng)
        line = 0
        ws = {}
        for side, coords in (("L", el), ("R", er)):
            writers = self.writers(side, goal.tensor)
            if not writers:
                raise ch.fail("coverage", 0, f"the {'left' if side == 'L' else 'right'} invocation never "
                                             f"stores to {goal.tensor}")
            line = writers[0].store.line
            hits = [z3.And(w.hit_any, *[c == e for c, e in zip(w.coords, coords)]) for w in writers]
            pool = [z3.IntVal(0)] + [z3.Int(n) for n in sorted(set().union(*[free_consts(c) for c in coords]))
                                     if "@" not in n and not n.startswith("_")]
            seeds = [self.hint(side, w, coords, goal.bound) if self.hint else [] for w in writers]
            if not any(self.covered_by_witness(w, h, coords, region, pool, sd)
                       for w, h, sd in zip(writers, hits, seeds)) \
                    and not self.p.unsat_with(list(region) + [z3.ForAll([v for w in writers for v in w.vars],
                                                                          z3.Not(z3.Or(*hits)))]):
                raise ch.fail("coverage", line, f"cannot prove that some program stores every element of "
                                                f"{goal.text!r} in the {'left' if side == 'L' else 'right'} "
                                                f"invocation")
            ch.ok("coverage", line, f"{goal.tensor}: every selected element is stored")
            for i, w in enumerate(writers):
                for w2 in writers[i:]:
                    o, ax = renamed(w2, self.sides[side].axioms)
                    same_writer = z3.And(*[x == y for x, y in zip(w.vars, o.vars)]) if w2 is w else z3.BoolVal(False)
                    clash = ax + [w.hit_any, o.hit_any, z3.Not(same_writer)] + \
                            [a == c for a, c in zip(w.coords, coords)] + [b == c for b, c in zip(o.coords, coords)]
                    if not self.p.unsat_with(list(region) + clash):
                        raise ch.fail("write-race", w.store.line,
                                      f"two programs or stores may write the same element of {goal.tensor}")
            ch.ok("write-race", line, f"{goal.tensor}: one writer per element")
            ws[side] = [(w, tuple(c == e for c, e in zip(w.coords, coords))) for w in writers]
        for wl, hl in ws["L"]:
            for wr, hr in ws["R"]:
                pc = region + (wl.hit_any,) + hl + (wr.hit_any,) + hr
                if not self.p.possible(pc):
                    continue
                va, vb = wl.store.value.at(wl.lanes), wr.store.value.at(wr.lanes)
                if isinstance(va, FTerm) and isinstance(vb, FTerm):
                    ch.eq(va, vb, pc)
                else:
                    za = va.to_z3(self.stride_vars["L"]) if isinstance(va, Lin) else va
                    zb = vb.to_z3(self.stride_vars["R"]) if isinstance(vb, Lin) else vb
                    if isinstance(va, FTerm) or isinstance(vb, FTerm) or not self.p.valid(za == zb, pc):
                        raise ch.fail("same-operation", wl.store.line, f"stored values of {goal.tensor} differ")

    def stored_here(self, tensor: str, coords: tuple, pc: tuple, line: int) -> FTerm:
        """What the left launch stores at `coords` of `tensor`, when the program and
        loop iteration the left side is symbolically at store it there (only the lanes are solved for) and
        no other program, lane, iteration or store writes that element. A store by another program cannot be
        named by a term of this one, so it fails here."""
        ch = self.ch
        writers = self.writers("L", tensor)
        out = []
        for w in writers:
            eqs = tuple(c == e for c, e in zip(w.coords, coords))
            # lanes from the goal's witness (a lane under // or % is not solved linearly), then solved
            seeded = [(v, e) for v, e in (self.hint("L", w, coords, ()) if self.hint else [])
                      if any(v.eq(l) for l in w.lanes)]
            sub = self.solve_linear(w, coords, [l for l in w.lanes if not any(l.eq(v) for v, _ in seeded)],
                                    seeded, lanes_zero=False)
            # a lane that no coordinate depends on (a broadcast store) may be any: take 0
            sub += [(l, z3.IntVal(0)) for l in w.lanes if not any(l.eq(v) for v, _ in sub)]
            hit = z3.And(w.hit_any, *eqs)
            if self.p.valid(z3.substitute(hit, *sub), pc):
                lanes = tuple(z3.substitute(l, *sub) for l in w.lanes)
                out.append((w, lanes))
        if len(out) != 1:
            raise ch.fail("coverage", line, f"cannot prove that this program of the left launch stores the "
                                            f"{tensor} element the right launch reads (exactly one store)")
        w, lanes = out[0]
        lane_sub = list(zip(w.lanes, lanes))
        mine = [z3.substitute(v, *lane_sub) for v in w.vars]
        for w2 in writers:
            o, ax = renamed(w2, self.sides["L"].axioms)
            same = z3.And(*[x == y for x, y in zip(mine, o.vars)]) if w2 is w else z3.BoolVal(False)
            clash = ax + [o.hit_any, z3.Not(same)] + [b == c for b, c in zip(o.coords, coords)]
            if not self.p.unsat_with(list(pc) + clash):
                raise ch.fail("write-race", w2.store.line, f"another program or store of the left launch may "
                                                           f"write the {tensor} element the right launch reads")
        ch.ok("write-race", w.store.line, f"{tensor}: the element read is stored once, by this program")
        return w.store.value.at(lanes)

    def covered_by_witness(self, w: Writer, hit: z3.BoolRef, target: tuple, region: tuple, pool: list,
                           seed: list = ()) -> bool:
        """Prove coverage by constructing the writer: solve linear coordinates for program ids, loop
        counters and lanes; try `pool` (the goal's free variables, 0) for the others."""
        n_lanes = len(w.lanes)
        seeded = [v for v, _ in seed]
        pids_ks = [v for v in w.vars if not any(v.eq(l) for l in w.lanes) and not any(v.eq(s) for s in seeded)]
        for combo in itertools.islice(itertools.product([None] + pool, repeat=len(pids_ks)), 200):
            sub = list(seed) + [(v, c) for v, c in zip(pids_ks, combo) if c is not None]
            sub = self.solve_linear(w, target, pids_ks, sub, lanes_zero=True)
            sub = self.solve_linear(w, target, list(w.lanes), sub, lanes_zero=False)
            if len(sub) != len(w.vars):
                continue
            # the writer's variables are set by equations (not substituted) so that facts about them,
            # such as a scan's count for this program id, still apply; `hit` re-checks their ranges
            if self.free_pids.valid(hit, region + tuple(v == val for v, val in sub)):
                return True
        del n_lanes
        return False

    @staticmethod
    def solve_linear(w: Writer, target: tuple, unknowns: list, sub: list, lanes_zero: bool) -> list:
        sub = list(sub)
        for _round in range(len(unknowns) + 1):
            progress = False
            for v in unknowns:
                if any(v.eq(a) for a, _ in sub):
                    continue
                for c, e in zip(w.coords, target):
                    f = z3.substitute(c, *sub) if sub else c
                    if lanes_zero:
                        zs = [(l, z3.IntVal(0)) for l in w.lanes]
                        f = z3.substitute(f, *zs)
                    names = free_consts(f)
                    if str(v) not in names:
                        continue
                    others = [u for u in unknowns if str(u) in names and not u.eq(v)
                              and not any(u.eq(a) for a, _ in sub)]
                    if others:
                        continue
                    f0 = z3.simplify(z3.substitute(f, (v, z3.IntVal(0))))
                    f1 = z3.simplify(z3.substitute(f, (v, z3.IntVal(1))))
                    f2 = z3.simplify(z3.substitute(f, (v, z3.IntVal(2))))
                    b = z3.simplify(f1 - f0)
                    if not z3.eq(z3.simplify(f2 - f1), b) or str(v) in free_consts(b) \
                            or (z3.is_int_value(b) and b.as_long() <= 0) \
                            or any(str(u) in free_consts(b) for u in unknowns):
                        continue
                    lp = next((lp for lp in w.store.loops if lp.k.eq(v)), None)
                    if lp is not None:  # a loop counter: start + multiple of its step
                        step = lp.step * b
                        sub.append((v, z3.simplify(lp.start + ((e - f0 - lp.start * b) / step) * lp.step)))
                    else:
                        one = z3.is_int_value(b) and b.as_long() == 1
                        sub.append((v, z3.simplify(e - f0) if one else z3.simplify((e - f0) / b)))
                    progress = True
                    break
            if not progress:
                break
        return sub

    def check_only(self, goal: Only) -> None:
        ch = self.ch
        for w in self.writers(goal.side, goal.tensor):
            def inside(sub):
                s = (lambda e: z3.substitute(e, *sub)) if sub else (lambda e: e)
                parts = [s(goal.cond)]
                for c, ix in zip(w.coords, goal.index):
                    parts.append(c == s(ix.at) if isinstance(ix, Point) else z3.And(s(ix.lo) <= c, c < s(ix.hi)))
                return z3.And(*parts)
            if not goal.bound:
                okay = self.p.valid(inside([]), (w.hit_any,))
            else:
                cands = int_subterms(list(w.coords))
                okay = any(self.p.valid(inside(list(zip(goal.bound, combo))), (w.hit_any,))
                           for combo in itertools.islice(itertools.product(cands, repeat=len(goal.bound)), 400))
            if not okay:
                raise ch.fail("write-frame", w.store.line,
                              f"the store to {goal.tensor} may land outside {goal.text!r}")
            ch.ok("write-frame", w.store.line, f"stores to {goal.tensor} stay inside the declared region")


__all__ = ["OutputGoals", "Failed", "Obligation"]
