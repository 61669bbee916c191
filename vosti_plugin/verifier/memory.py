"""Memory and integer obligations of one launch (checked on the left invocation: they hold for every launch
the precondition admits, not only for the two compared).

  * int-overflow: int32 arithmetic feeding an address or a mask must not wrap (Triton computes int32 when
    every operand is int32: program ids, aranges, int32 loads, and scalar arguments whose value fits int32
    -- Triton specializes an integer argument to int64 only when it does not fit); a narrowing cast must
    not drop bits.  int64 arithmetic is not checked for wrapping (trusted: offsets stay below 2**63);
  * int-division: `//` and `%` truncate toward zero in Triton and round down in Z3; the verifier uses Z3's
    value, so where it feeds an address or a mask the divisor must be positive and the dividend
    non-negative or a multiple of it (then both agree);
  * read-after-write: a load reads pre-launch data only if no program of the same launch may store to the
    element it reads; the one exception is a program reading an element before it writes it itself in the
    same loop iteration (an in-place update);
  * store-in-bounds: every store lands inside its tensor's shape (a negative or too large coordinate
    writes into another tensor or another request's rows).
Lanes a mask hides and programs a guard (`if ...: return`) stops are exempt from the first two.

Not checked: int64 wrapping; loads outside a tensor's shape (a load is only trusted inside a region the
contract declares equal or `finite`, and a masked-off lane reads its `other`); integer side conditions of
values that only select floats (`tl.where(cond, a, b)` with a wrapped cond).

Assumed of every launch (stated here, not in each contract): sizes -- tensor dimensions and integer scalar
arguments that are not strides -- are non-negative and below SIZE_LIMIT = 2**30; strides are any
non-negative integer.  So `pid * BLOCK + arange` near a size is fine, `row * stride` in int32 is not.
"""
from __future__ import annotations

import itertools
from typing import Callable

import z3

from vosti_plugin.verifier.outputs import make_writer, renamed
from vosti_plugin.verifier.relational import Failed
from vosti_plugin.verifier.report import Obligation
from vosti_plugin.verifier.smt import Prover
from vosti_plugin.verifier.symbolic import LoadInfo, SideResult, StoreInfo

_ids = itertools.count()
SIZE_LIMIT = 2 ** 30


def _mask_bool(mask, lanes, stride_var) -> z3.BoolRef:
    m = mask.at(lanes)
    return m if isinstance(m, z3.BoolRef) else m.to_z3(stride_var) != 0


def _access(a, pids: tuple, grid: tuple, stride_var) -> tuple[tuple, z3.BoolRef, z3.BoolRef]:
    """lanes, the condition that the access runs for them (mask aside), and its mask at them."""
    lanes = tuple(z3.Int(f"_m{next(_ids)}_{d}") for d in range(len(a.shape)))
    parts = [z3.And(0 <= l, l < n) for l, n in zip(lanes, a.shape)]
    parts += [z3.And(0 <= p, p < g) for p, g in zip(pids, grid)]
    parts += [lp.in_range() for lp in a.loops]
    parts.append(a.guard)
    mask = _mask_bool(a.mask, lanes, stride_var) if a.mask is not None else z3.BoolVal(True)
    return lanes, z3.And(*parts), mask


def _first_failing(prover: Prover, conds: tuple, pc: tuple):
    for name, line, c in sorted(conds, key=lambda x: (x[1], x[0])):
        if not prover.valid(c, pc):
            return name, line, c
    return None


def check_side_conditions(prover: Prover, side: SideResult, grid: tuple, stride_var: Callable,
                          ok: Callable[[str, int, str], None]) -> None:
    """int-overflow and int-division at every load and store (its address under its mask, its mask under
    the program's guard)."""
    pids = tuple(z3.Int(f"pid{a}@{side.side}") for a in range(len(grid)))
    accesses: list = list(side.loads) + list(side.stores)
    for a in accesses:
        if a.ptr.side is None and (a.mask is None or a.mask.side is None):
            continue
        lanes, runs, mask = _access(a, pids, grid, stride_var)
        groups = []
        if a.mask is not None and a.mask.side is not None:
            groups.append((a.mask.conds(lanes), (runs,)))
        if a.ptr.side is not None:
            groups.append((a.ptr.conds(lanes), (runs, mask)))
        for conds, pc in groups:
            # one query per condition: Z3 refutes them one at a time far faster than their conjunction
            bad = _first_failing(prover, conds, pc)
            if bad is None:
                continue
            name, line, _c = bad
            what = "may wrap around (int32 arithmetic on values that can exceed 2**31 - 1; cast an operand " \
                   "to tl.int64)" if name == "int-overflow" else \
                "may divide a negative value (Triton's // and % truncate toward zero)"
            raise Failed(Obligation(name, line, "failed",
                                    f"the integer arithmetic at line {line}, used by the "
                                    f"{'load' if isinstance(a, LoadInfo) else 'store'} of {a.tensor} at line "
                                    f"{a.line}, {what}"))
        ok("int-overflow", a.line, f"address and mask of {a.tensor} computed without wrapping")


def check_read_after_write(prover: Prover, side: SideResult, grid: tuple, stride_var: Callable,
                           ok: Callable[[str, int, str], None]) -> None:
    pids = tuple(z3.Int(f"pid{a}@{side.side}") for a in range(len(grid)))
    stored = {s.tensor for s in side.stores}
    for ld in side.loads:
        if ld.tensor not in stored:
            continue
        lanes, runs, mask = _access(ld, pids, grid, stride_var)
        coords = ld.ptr.at(lanes).coords
        for st in side.stores:
            if st.tensor != ld.tensor:
                continue
            w, axioms = renamed(make_writer(st, pids, grid, stride_var), side.axioms)
            same_prog = z3.And(*[p == q for p, q in zip(pids, w.vars[:len(pids)])])
            shared = [i for i, lp in enumerate(st.loops) if any(lp is x for x in ld.loops)]
            loop_vars = w.vars[len(pids) + len(w.lanes):]
            same_iter = z3.And(*[st.loops[i].k == loop_vars[i] for i in shared])
            in_place = z3.And(same_prog, same_iter, z3.BoolVal(st.seq > ld.seq)) if st.seq > ld.seq \
                else z3.BoolVal(False)
            clash = axioms + [runs, mask, w.hit_any, z3.Not(in_place)] + \
                [a == b for a, b in zip(coords, w.coords)]
            if not prover.unsat_with(clash):
                raise Failed(Obligation("read-after-write", ld.line, "failed",
                                        f"the load of {ld.tensor} may read an element that the store at line "
                                        f"{st.line} of the same launch writes (another program, a later lane or "
                                        f"an earlier iteration): the value depends on the order programs run "
                                        f"in, not only on the launch's inputs"))
        ok("read-after-write", ld.line, f"no program of the launch writes what the load of {ld.tensor} reads")


def check_store_bounds(prover: Prover, side: SideResult, grid: tuple, stride_var: Callable,
                       shape_of: Callable[[str], tuple], ok: Callable[[str, int, str], None]) -> None:
    pids = tuple(z3.Int(f"pid{a}@{side.side}") for a in range(len(grid)))
    for st in side.stores:
        w = make_writer(st, pids, grid, stride_var)
        shape = shape_of(st.tensor)
        inside = z3.And(*[z3.And(0 <= c, c < n) for c, n in zip(w.coords, shape)])
        if not prover.valid(inside, (w.hit_any,) + tuple(side.axioms)):
            raise Failed(Obligation("store-in-bounds", st.line, "failed",
                                    f"the store to {st.tensor} may land outside its shape {shape} (a negative "
                                    f"or too large coordinate writes memory the launch does not own)"))
        ok("store-in-bounds", st.line, f"stores to {st.tensor} stay inside its shape")


__all__ = ["check_side_conditions", "check_read_after_write", "check_store_bounds", "StoreInfo"]
