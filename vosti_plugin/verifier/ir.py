"""Tile-level IR for the Triton subset the verifier understands.

Every node is a frozen dataclass carrying the kernel-file line it came from, so an obligation built from
it can name the line.  Expressions are trees; statements are a structured list (no CFG): straight-line
assignments, stores, `for` loops over ranges, scalar `if`s and early returns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

# -- expressions -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    value: Union[int, float, bool, str, None]  # str: a dtype name such as "float32"
    line: int


@dataclass(frozen=True)
class Name:
    id: str
    line: int


@dataclass(frozen=True)
class ProgramId:
    axis: int
    line: int


@dataclass(frozen=True)
class Arange:
    start: "Expr"
    end: "Expr"
    line: int


@dataclass(frozen=True)
class Full:
    shape: tuple["Expr", ...]
    value: "Expr"
    dtype: str
    line: int


@dataclass(frozen=True)
class BinOp:
    op: str  # add sub mul div floordiv mod and or xor lshift rshift
    left: "Expr"
    right: "Expr"
    line: int


@dataclass(frozen=True)
class UnaryOp:
    op: str  # neg not invert
    operand: "Expr"
    line: int


@dataclass(frozen=True)
class Compare:
    op: str  # lt le gt ge eq ne
    left: "Expr"
    right: "Expr"
    line: int


@dataclass(frozen=True)
class Math:
    """Elementwise math: exp exp2 log log2 sqrt rsqrt tanh abs maximum minimum fma sigmoid cdiv min max..."""

    fn: str
    args: tuple["Expr", ...]
    line: int


@dataclass(frozen=True)
class Where:
    cond: "Expr"
    a: "Expr"
    b: "Expr"
    line: int


@dataclass(frozen=True)
class Load:
    ptr: "Expr"
    mask: Union["Expr", None]
    other: Union["Expr", None]
    line: int


@dataclass(frozen=True)
class DescLoad:
    """`desc.load([o0, o1, ...])` on a tensor-descriptor parameter."""
    desc: str
    offsets: tuple["Expr", ...]
    line: int


@dataclass(frozen=True)
class Reduce:
    op: str  # sum max min
    x: "Expr"
    axis: int
    line: int


@dataclass(frozen=True)
class Dot:
    a: "Expr"
    b: "Expr"
    acc: Union["Expr", None]
    line: int
    options: tuple = ()  # (keyword, Expr): input_precision, allow_tf32, out_dtype, max_num_imprecise_acc


@dataclass(frozen=True)
class Trans:
    x: "Expr"
    line: int


@dataclass(frozen=True)
class Reshape:
    """`x.reshape(d0, d1, ...)` / `tl.reshape(x, [d0, ...])` that only adds or drops axes of size 1."""

    x: "Expr"
    dims: tuple["Expr", ...]
    line: int


@dataclass(frozen=True)
class Subscript:
    """`x[:, None]`-style broadcasting: entries are ':' (keep an axis) or None (insert an axis)."""

    x: "Expr"
    pattern: tuple[Union[str, None], ...]
    line: int


@dataclass(frozen=True)
class Cast:
    x: "Expr"
    dtype: "Expr"
    line: int
    rounding: str = "rtne"  # fp_downcast_rounding ("rtne", "rtz") or "bitcast"


@dataclass(frozen=True)
class DtypeOf:
    """`ptr.dtype.element_ty` of a pointer parameter."""

    param: str
    line: int


@dataclass(frozen=True)
class TileDtype:
    """`x.dtype` of a local tile."""

    x: "Expr"
    line: int


@dataclass(frozen=True)
class IfExp:
    """Python `a if c else b` on scalars (constexpr or runtime)."""

    cond: "Expr"
    a: "Expr"
    b: "Expr"
    line: int


Expr = Union[Const, Name, ProgramId, Arange, Full, BinOp, UnaryOp, Compare, Math, Where, Load, DescLoad, Reduce, Dot,
             Trans, Reshape, Subscript, Cast, DtypeOf, TileDtype, IfExp]

# -- statements --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assign:
    target: str
    value: Expr
    line: int


@dataclass(frozen=True)
class Store:
    ptr: Expr
    value: Expr
    mask: Union[Expr, None]
    line: int


@dataclass(frozen=True)
class For:
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple["Stmt", ...]
    line: int


@dataclass(frozen=True)
class If:
    cond: Expr
    then: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...]
    line: int


@dataclass(frozen=True)
class Return:
    line: int


@dataclass(frozen=True)
class Check:
    """An integer condition the verifier must prove wherever execution reaches it (obligation `name`)."""

    cond: Expr
    name: str
    message: str
    line: int


Stmt = Union[Assign, Store, For, If, Return, Check]


@dataclass(frozen=True)
class Param:
    name: str
    constexpr: bool
    line: int


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    filename: str
    line: int  # line of the `def`
