"""Symbolic values of one program instance: integer linear forms, float element terms and tiles.

A tile is a function from lane indices (Z3 integers, one per axis) to an element:
  * int  -> `Lin`, a linear form whose keys are stride parameters (so a pointer offset can be split back
            into coordinates) plus the unit key None;
  * bool -> a Z3 boolean;
  * ptr  -> `PtrElem`, the tensor and one Z3 coordinate per dimension;
  * float-> an `FTerm`: floats are uninterpreted, so a float element is a term tree whose leaves are loads,
            parameters, constants and loop states.  Two terms are equal when built by the same operations from
            equal leaves; nothing is reassociated.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import z3

Z = z3.ArithRef


def zkey(e: Any) -> Any:
    return ("z", e.get_id()) if isinstance(e, z3.ExprRef) else e


def monomial(stride: str) -> tuple[str, ...]:
    """A contract stride such as "num_q_heads*num_segments" as a sorted tuple of names."""
    return tuple(sorted(x.strip() for x in stride.split("*")))


class Lin:
    """sum(coeff[k] * prod(k)) + coeff[None]; keys are monomials (sorted tuples) of the parameters that
    appear in tensor strides, so a pointer offset splits back into coordinates; coefficients are Z3 ints."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict[Optional[str], Z]):
        self.terms = {k: v for k, v in terms.items()}

    @staticmethod
    def const(e: Union[int, Z]) -> "Lin":
        return Lin({None: z3.IntVal(e) if isinstance(e, int) else e})

    def coeff(self, key: Optional[str]) -> Z:
        return self.terms.get(key, z3.IntVal(0))

    @property
    def stride_keys(self) -> list[str]:
        return [k for k in self.terms if k is not None]

    def __add__(self, o: "Lin") -> "Lin":
        t = dict(self.terms)
        for k, v in o.terms.items():
            t[k] = z3.simplify(t[k] + v) if k in t else v
        return Lin(t)

    def neg(self) -> "Lin":
        return Lin({k: z3.simplify(-v) for k, v in self.terms.items()})

    def __sub__(self, o: "Lin") -> "Lin":
        return self + o.neg()

    def scale(self, c: Z) -> "Lin":
        return Lin({k: z3.simplify(v * c) for k, v in self.terms.items()})

    def times(self, o: "Lin") -> "Lin":
        t: dict = {}
        for k1, c1 in self.terms.items():
            for k2, c2 in o.terms.items():
                key = tuple(sorted((k1 or ()) + (k2 or ()))) or None
                c = z3.simplify(c1 * c2)
                t[key] = z3.simplify(t[key] + c) if key in t else c
        return Lin(t)

    def to_z3(self, stride_var: Callable[[str], Z]) -> Z:
        acc = self.coeff(None)
        for k in self.stride_keys:
            term = self.terms[k]
            for name in k:
                term = term * stride_var(name)
            acc = acc + term
        return z3.simplify(acc)


@dataclass(frozen=True, eq=False)
class PtrElem:
    tensor: str
    side: str
    coords: tuple[Z, ...]


# -- float terms ---------------------------------------------------------------------------------------


class FTerm:
    line: int = 0

    @property
    def key(self) -> tuple:  # structural identity (Z3 ASTs are hash-consed, so get_id is structural)
        k = self.__dict__.get("_key")
        if k is None:
            k = self._key()
            object.__setattr__(self, "_key", k)
        return k

    def _key(self) -> tuple:
        raise NotImplementedError


def _fbits(v: float) -> bytes:
    return struct.pack("<d", v)


@dataclass(frozen=True, eq=False)
class FConst(FTerm):
    value: float
    line: int = 0

    def _key(self):
        return ("const", _fbits(float(self.value)))

    def same_value(self, other: "FConst") -> bool:
        a, b = float(self.value), float(other.value)
        return (math.isnan(a) and math.isnan(b)) or _fbits(a) == _fbits(b)


@dataclass(frozen=True, eq=False)
class FParam(FTerm):
    name: str
    side: str  # "L", "R" or "both" (listed in `same`)
    line: int = 0

    def _key(self):
        return ("param", self.name, self.side)


@dataclass(frozen=True, eq=False)
class FUndef(FTerm):
    what: str
    line: int = 0

    def _key(self):
        return ("undef", id(self))


@dataclass(frozen=True, eq=False)
class FLoad(FTerm):
    tensor: str
    side: str
    coords: tuple[Z, ...]
    mask: Optional[z3.BoolRef]
    other: Optional[FTerm]
    line: int = 0

    def _key(self):
        return ("load", self.tensor, self.side, tuple(zkey(c) for c in self.coords), zkey(self.mask),
                self.other.key if self.other is not None else None, self.line)


@dataclass(frozen=True, eq=False)
class FOp(FTerm):
    op: str
    args: tuple[FTerm, ...]
    line: int = 0

    def _key(self):
        return ("op", self.op, tuple(a.key for a in self.args))


@dataclass(frozen=True, eq=False)
class FFromInt(FTerm):
    value: Z
    line: int = 0

    def _key(self):
        return ("fromint", zkey(self.value))


@dataclass(frozen=True, eq=False)
class FSelect(FTerm):
    cond: Union[z3.BoolRef, FTerm]
    a: FTerm
    b: FTerm
    line: int = 0

    def _key(self):
        c = self.cond.key if isinstance(self.cond, FTerm) else zkey(self.cond)
        return ("select", c, self.a.key, self.b.key)


@dataclass(frozen=True, eq=False)
class FReduce(FTerm):
    op: str  # sum max min dot
    var: Z
    extent: int
    body: FTerm
    line: int = 0

    def _key(self):
        return ("reduce", self.op, zkey(self.var), zkey(self.extent), self.body.key)


@dataclass(frozen=True, eq=False)
class FState(FTerm):
    """Loop-carried variable `name` of loop `loop` at the start of iteration `k`, at `lanes`."""

    loop: str
    name: str
    side: str
    lanes: tuple[Z, ...]
    line: int = 0

    def _key(self):
        return ("state", self.loop, self.name, self.side, tuple(zkey(x) for x in self.lanes))


@dataclass(frozen=True, eq=False)
class FLoopOut(FTerm):
    """Loop-carried variable `name` after loop `loop`, at `lanes`."""

    loop: str
    name: str
    side: str
    lanes: tuple[Z, ...]
    line: int = 0

    def _key(self):
        return ("out", self.loop, self.name, self.side, tuple(zkey(x) for x in self.lanes))


def describe(t: FTerm) -> str:
    if isinstance(t, FConst):
        return repr(float(t.value))
    if isinstance(t, FParam):
        return t.name
    if isinstance(t, FLoad):
        return f"load {t.tensor} (line {t.line})"
    if isinstance(t, FOp):
        return f"{t.op}(...) (line {t.line})"
    if isinstance(t, FSelect):
        return f"where(...) (line {t.line})"
    if isinstance(t, FReduce):
        return f"{t.op}-reduction (line {t.line})"
    if isinstance(t, FState):
        return f"loop state {t.name}"
    if isinstance(t, FLoopOut):
        return f"{t.name} after the loop at line {t.loop.split('@')[0][4:]}"
    if isinstance(t, FFromInt):
        return f"int->float {t.value}"
    if isinstance(t, FUndef):
        return f"undefined value ({t.what})"
    return type(t).__name__


# -- tiles ---------------------------------------------------------------------------------------------

Elem = Union[Lin, z3.BoolRef, PtrElem, FTerm]


@dataclass(eq=False)
class Tile:
    kind: str  # int bool float fbool ptr dtype
    shape: tuple[int, ...]
    fn: Callable[[tuple], Elem]
    concrete: Any = None  # Python value of a constexpr scalar
    dtype: Optional[str] = None
    memo: dict = field(default_factory=dict, repr=False)  # lane ids -> (lanes, element); fn is pure
    # integer tiles: is the value 64 bits wide (a Z3 boolean: a scalar argument is int64 only when its value
    # does not fit int32, as Triton specializes it), and the side conditions its computation needs (no
    # int32 wrap, no truncating division of a negative value): lanes -> ((obligation, line, condition), ...)
    wide: Any = None
    side: Optional[Callable[[tuple], tuple]] = None
    side_memo: dict = field(default_factory=dict, repr=False)

    def at(self, lanes: tuple) -> Elem:
        lanes = tuple(lanes)
        key = tuple(x.get_id() if isinstance(x, z3.AstRef) else ("py", x) for x in lanes)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = (lanes, self.fn(lanes))  # the lanes stay alive, so their ids are not reused
        return hit[1]

    def conds(self, lanes: tuple) -> tuple:
        if self.side is None:
            return ()
        lanes = tuple(lanes)
        key = tuple(x.get_id() if isinstance(x, z3.AstRef) else ("py", x) for x in lanes)
        hit = self.side_memo.get(key)
        if hit is None:
            hit = self.side_memo[key] = (lanes, self.side(lanes))
        return hit[1]

    @property
    def is_wide(self) -> z3.BoolRef:
        return self.wide if self.wide is not None else z3.BoolVal(False)


INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def fits32(e: Any) -> z3.BoolRef:
    return z3.And(e >= INT32_MIN, e <= INT32_MAX)


def merge_conds(*groups: tuple) -> tuple:
    seen, out = set(), []
    for g in groups:
        for c in g:
            k = (c[0], c[1], c[2].get_id())
            if k not in seen:
                seen.add(k)
                out.append(c)
    return tuple(out)


def wider(*tiles: "Tile") -> Any:
    ws = [t.wide for t in tiles if t is not None and t.wide is not None]
    if not ws:
        return None
    w = z3.simplify(z3.Or(*ws)) if len(ws) > 1 else ws[0]
    return None if z3.is_false(w) else w


def with_side(t: "Tile", side: Optional[Callable[[tuple], tuple]], wide: Any = None) -> "Tile":
    t.side = side
    t.wide = wide
    return t


def carried_side(parts: list, lane_map: Callable[[tuple, int], tuple]) -> Optional[Callable[[tuple], tuple]]:
    """The side conditions of a tile built from `parts` (each read at lane_map(lanes, index))."""
    parts = [(i, p) for i, p in enumerate(parts) if p is not None and p.side is not None]
    if not parts:
        return None
    return lambda l: merge_conds(*[p.conds(lane_map(l, i)) for i, p in parts])


def const_tile(v: Any) -> Tile:
    if isinstance(v, bool):
        return Tile("bool", (), lambda _l: z3.BoolVal(v), concrete=v)
    if isinstance(v, int):
        return Tile("int", (), lambda _l: Lin.const(v), concrete=v)
    if isinstance(v, float):
        return Tile("float", (), lambda _l: FConst(v), concrete=v, dtype="float32")
    if isinstance(v, str):
        return Tile("dtype", (), lambda _l: None, concrete=v)
    raise TypeError(v)


def is_one(d: Any) -> bool:
    return isinstance(d, int) and d == 1


def dims_eq(x: Any, y: Any) -> bool:
    """Tile extents are ints, or Z3 terms when a constexpr is verified symbolically."""
    if isinstance(x, int) and isinstance(y, int):
        return x == y
    zx = z3.IntVal(x) if isinstance(x, int) else x
    zy = z3.IntVal(y) if isinstance(y, int) else y
    return z3.eq(z3.simplify(zx), z3.simplify(zy))


def shapes_eq(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(dims_eq(x, y) for x, y in zip(a, b))


def broadcast_shape(a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    a2 = (1,) * (n - len(a)) + tuple(a)
    b2 = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a2, b2):
        if is_one(x):
            out.append(y)
        elif is_one(y) or dims_eq(x, y):
            out.append(x)
        else:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
    return tuple(out)


def broadcast(t: Tile, shape: tuple) -> Tile:
    if shapes_eq(t.shape, shape):
        return t
    n, m = len(shape), len(t.shape)
    src = t.shape
    zero = z3.IntVal(0)

    def sub_lanes(lanes, n=n, m=m, src=src):
        return tuple(zero if is_one(s) else x for s, x in zip(src, lanes[n - m:]))

    def fn(lanes, t=t):
        return t.at(sub_lanes(lanes))

    out = Tile(t.kind, shape, fn, None, t.dtype, wide=t.wide)
    if t.side is not None:
        out.side = lambda lanes, t=t: t.conds(sub_lanes(lanes))
    return out
