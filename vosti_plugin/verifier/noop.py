"""Value analysis for iterations that only one invocation runs: is the selected loop state unchanged?

Abstract values: ("old", name, lanes) for a loop-carried value as it was before the iteration,
("const", x) for the constants 0, +-1, +-inf and NaN, and ("top", line, why) for anything else.
Only IEEE-exact identities are used: max(x, -inf) = x, min(x, +inf) = x, x * 1 = x, x / 1 = x,
x + (-0.0) = x, x - 0.0 = x, exp(0) = 1, exp(-inf) = 0.  x + 0.0 is NOT x (x = -0.0), x - x is NOT 0
(x = +-inf), 0 * x is NOT 0 (x = inf/NaN): a masked tile must be made a no-op explicitly (tl.where on the
mask), not by arithmetic cancellation.
"""
from __future__ import annotations

import math
import struct
from typing import Optional

import z3

from vosti_plugin.verifier.smt import Prover
from vosti_plugin.verifier.values import FConst, FLoad, FOp, FReduce, FSelect, FState, FTerm, describe

_EXACT = {0.0, 1.0, -1.0, math.inf, -math.inf}


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _const(x: float):
    if math.isnan(x) or x in _EXACT:
        return ("const", x)
    return ("top", 0, f"constant {x}")


class NoopAnalysis:
    def __init__(self, prover: Prover):
        self.p = prover

    def preserves(self, term: FTerm, name: str, lanes: tuple, line: int, loop: str, pc: tuple) \
            -> Optional[tuple[int, str]]:
        v = self.eval(term, loop, pc)
        if v[0] == "old" and v[1] == name and self.p.valid(z3.And(*[x == y for x, y in zip(v[2], lanes)]), pc):
            return None
        if v[0] == "top":
            return v[1], f"{v[2]}, so the state is not provably unchanged", v[3] if len(v) > 3 else "masked"
        return line, f"its new value is {self.show(v)} instead of the old value", "masked"

    @staticmethod
    def show(v) -> str:
        if v[0] == "const":
            return repr(v[1])
        if v[0] == "old":
            return f"the old {v[1]} at other lanes"
        return "unknown"

    def same(self, a, b, pc) -> bool:
        if a[0] != b[0]:
            return False
        if a[0] == "const":
            return (math.isnan(a[1]) and math.isnan(b[1])) or _bits(a[1]) == _bits(b[1])
        if a[0] == "old":
            return a[1] == b[1] and self.p.valid(z3.And(*[x == y for x, y in zip(a[2], b[2])]), pc)
        return False

    def is_zero(self, t: FTerm, pc: tuple) -> bool:
        v = self.eval(t, None, pc)
        return v[0] == "const" and v[1] == 0.0

    def eval(self, t: FTerm, loop, pc: tuple, nn: frozenset = frozenset()):
        """nn: keys of terms known not to be -inf (from an enclosing `where(x == -inf, ..., ...)`)."""
        if isinstance(t, FState) and t.loop == loop:
            return ("old", t.name, t.lanes)
        if isinstance(t, FConst):
            return _const(float(t.value))
        if isinstance(t, FSelect):
            if isinstance(t.cond, FTerm):
                nb = nn
                c = t.cond
                if isinstance(c, FOp) and c.op == "eq" and len(c.args) == 2:
                    x, y = c.args
                    if isinstance(y, FConst) and y.value == -math.inf:
                        nb = nn | {x.key}
                    elif isinstance(x, FConst) and x.value == -math.inf:
                        nb = nn | {y.key}
                va, vb = self.eval(t.a, loop, pc, nn), self.eval(t.b, loop, pc, nb)
                return va if self.same(va, vb, pc) else ("top", t.line, "a float-predicated select whose "
                                                                        "branches differ")
            c = t.cond
            if not self.p.possible(pc + (c,)):
                return self.eval(t.b, loop, pc + (z3.Not(c),), nn)
            if not self.p.possible(pc + (z3.Not(c),)):
                return self.eval(t.a, loop, pc + (c,), nn)
            va, vb = self.eval(t.a, loop, pc + (c,), nn), self.eval(t.b, loop, pc + (z3.Not(c),), nn)
            if self.same(va, vb, pc):
                return va
            return ("top", t.line, "tl.where's condition is not decided for the skipped iteration "
                                   "(the mask is not provably all-false on the selected row)", "live")
        if isinstance(t, FLoad):
            if t.mask is not None and not self.p.possible(pc + (t.mask,)):
                return self.eval(t.other, loop, pc, nn) if t.other is not None else ("top", t.line, "undefined load")
            return ("top", t.line, f"data loaded from {t.tensor}", "live")
        if isinstance(t, FReduce):
            j = t.var
            body = self.eval(t.body, loop, pc + (z3.And(0 <= j, j < t.extent),), nn)
            if body[0] == "const" and t.op in ("max", "min"):
                return body
            if body[0] == "const" and t.op == "sum" and _bits(body[1]) == _bits(0.0):
                return body
            return ("top", t.line, f"a {t.op}-reduction over values that are not a known constant"
                    + (f" ({body[2]})" if body[0] == "top" else ""), body[3] if body[0] == "top" and len(body) > 3
                    else "masked")
        if isinstance(t, FOp):
            args = [self.eval(a, loop, pc, nn) for a in t.args]
            if t.op == "sub" and args[0][0] == "const" and args[0][1] == -math.inf and t.args[1].key in nn:
                return ("const", -math.inf)  # -inf - x = -inf for x != -inf (x not NaN: data assumed finite)
            return self.op(t, args)
        return ("top", t.line, describe(t))

    def op(self, t: FOp, args):
        consts = [a[1] for a in args if a[0] == "const"]
        k = lambda i, x: args[i][0] == "const" and _bits(args[i][1]) == _bits(x)  # noqa: E731
        if t.op == "maximum":
            if k(1, -math.inf):
                return args[0]
            if k(0, -math.inf):
                return args[1]
        if t.op == "minimum":
            if k(1, math.inf):
                return args[0]
            if k(0, math.inf):
                return args[1]
        if t.op == "mul":
            if k(1, 1.0):
                return args[0]
            if k(0, 1.0):
                return args[1]
        if t.op == "div" and k(1, 1.0):
            return args[0]
        if t.op == "add":
            if k(1, -0.0):
                return args[0]
            if k(0, -0.0):
                return args[1]
        if t.op == "sub" and k(1, 0.0):
            return args[0]
        if t.op.startswith("cast:") and args[0][0] == "const":
            return args[0]
        if len(consts) == len(args):
            try:
                x = self.fold(t.op, consts)
            except (ValueError, OverflowError, ZeroDivisionError):
                x = None
            if x is not None:
                return _const(x)
        top = next((a for a in args if a[0] == "top"), None)
        if top is not None:
            return top
        return ("top", t.line, f"{t.op} of {', '.join(self.show(a) for a in args)} is not provably the old value")

    @staticmethod
    def fold(op: str, xs: list[float]) -> Optional[float]:
        if op in ("exp", "exp2") and xs[0] in (0.0, -math.inf):
            return 1.0 if xs[0] == 0.0 else 0.0
        if op in ("log", "log2") and xs[0] == 1.0:
            return 0.0
        if op == "neg":
            return -xs[0]
        if op == "maximum":
            return max(xs)
        if op == "minimum":
            return min(xs)
        if op == "add":
            return xs[0] + xs[1]
        if op == "sub":
            return xs[0] - xs[1]
        if op == "mul":
            return xs[0] * xs[1]
        return None
