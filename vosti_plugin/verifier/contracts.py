"""Contract annotations written right above `@triton.jit`.

    @contract(
        params={"x": tensor(("M", "N"), ("stride_xm", 1)), "o": tensor(("M", "N"), ("stride_om", 1)),
                "eps": scalar("float32")},
        grid=("M",),
        verif=[goal("row_invariance", same=("N", "eps"),
                    pre=("R.M == 1", "0 <= x < L.M", "L.x[x, :] == R.x[0, :]"),
                    post=("L.o[x, :] == R.o[0, :]",))],
    )
    @triton.jit
    def rmsnorm_kernel(x, o, M, N, stride_xm, stride_om, eps, BLOCK_N: tl.constexpr): ...

At runtime `contract` only attaches the spec to the kernel object (`__vosti_contract__`) and returns it
unchanged.  Expressions are Python syntax:
  * `L.name` / `R.name`: a parameter or shape symbol in the left / right invocation; a bare parameter name
    must be listed in `same`; constexpr names take the config's value; other bare names are free variables,
    universally quantified over the goal (the selected row, position, page...).
  * `L.T[i, a:b, :] == R.T[j, c:d, :]`: the region of tensor T selected on the left equals the one on the
    right, slice by slice (`:` is the whole dimension).  In `pre` it is an assumption, in `post` the goal.
  * `forall(t, cond, clause)`: the clause for every integer t with cond.
  * `only(L.T[...])` in post: every store of this invocation to T lands in the region (a frame condition).
  * `finite(L.T[...])` in pre: the region holds no inf or NaN (what lets a product with an exact 0 factor
    ignore the other factor: 0 * x is 0 only for finite x).
  * `fed(L.T[i, ...], R.T[j, ...])` in pre: the right launch runs on the left one's output, and reads at
    T[j, ...] what the left launch stored at T[i, ...]. The right side's load is then compared as the term the
    left side stores there, provided the left program and loop iteration at hand is that element's only
    writer (one launch composed with another, e.g. a fold of stored partials against a fused fold).
  * `cdiv(a, b)`, `min(a, b)`, `max(a, b)`, `implies(a, b)`, `and`, `or`, `not`, `//`, `%`.
Integer parameters and shape symbols are assumed >= 0.  Strides are treated as distinct symbols: tensors
do not alias and each coordinate is recovered from the multiple of its stride in a pointer offset.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Union

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64", "float8e4nv", "float8e5")


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[str, ...]
    strides: tuple[Union[str, int], ...]
    dtype: str = "float32"
    block: tuple[str, ...] = ()  # a tensor descriptor's block shape (constexpr names); () for a pointer
    view_of: str = ""  # a descriptor over another parameter's tensor: its loads are loads of that tensor
    view_dims: tuple[int, ...] = ()  # the tensor's axis each descriptor axis is

    @property
    def is_descriptor(self) -> bool:
        return bool(self.block)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES


@dataclass(frozen=True)
class ScalarSpec:
    dtype: str = "int32"

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES


@functools.lru_cache(maxsize=None)
def _compiled(expr: str):
    return compile(expr, "<when>", "eval")


@dataclass(frozen=True)
class Goal:
    name: str
    same: tuple[str, ...] = ()
    pre: tuple[str, ...] = ()
    post: tuple[str, ...] = ()
    witness: tuple[tuple[str, str, str], ...] = ()  # (side, writer variable, expression)
    when: str = ""  # a Python condition on the config's constexprs; the goal applies only where it holds
    across: tuple[str, ...] = ()  # constexprs that may differ between the two launches (a cross-config goal)
    right_when: str = ""  # a cross-config goal: the condition on the right launch's constexprs

    def applies(self, config: dict) -> bool:
        return _holds(self.when, config)

    def applies_right(self, config: dict) -> bool:
        return _holds(self.right_when, config)


def _holds(condition: str, config: dict) -> bool:
    return not condition or bool(eval(_compiled(condition), {"__builtins__": {}}, dict(config)))  # noqa: S307


@dataclass(frozen=True)
class Contract:
    params: tuple[tuple[str, Union[TensorSpec, ScalarSpec]], ...]
    grid: tuple[str, ...]
    verif: tuple[Goal, ...]
    configs: Any = None  # optional: configs to verify when the kernel has no catalog
    symbolic: tuple[str, ...] = ()  # integer constexprs proved for every value satisfying `assume`
    assume: tuple[str, ...] = ()  # facts about the symbolic constexprs; each config is checked against them
    bounds: tuple[str, ...] = ()  # integer-range facts of every launch, for the memory obligations only

    def param(self, name: str) -> Union[TensorSpec, ScalarSpec, None]:
        return dict(self.params).get(name)

    @property
    def tensors(self) -> dict[str, TensorSpec]:
        return {k: v for k, v in self.params if isinstance(v, TensorSpec)}


def tensor(shape: tuple[str, ...] | list[str], strides: tuple[Union[str, int], ...] | list, dtype: str = "float32") \
        -> TensorSpec:
    if len(shape) != len(strides):
        raise ValueError(f"tensor shape {shape} and strides {strides} differ in rank")
    return TensorSpec(tuple(str(s) for s in shape), tuple(strides), dtype)


def tensor_descriptor(shape: tuple[str, ...] | list[str], strides: tuple[Union[str, int], ...] | list,
                      block: tuple[str, ...] | list[str], dtype: str = "float32", *, view_of: str = "",
                      view_dims: tuple[int, ...] = ()) -> TensorSpec:
    """A TMA tensor descriptor over a tensor of `shape` and `strides`, loaded in blocks of `block` (constexpr
    names): `desc.load([o0, o1])` reads elements o0 + i, o1 + j, and 0 where they fall outside `shape`.
    view_of: the descriptor reads another tensor parameter of the contract (the host builds it from that tensor),
    its axis d being the tensor's axis view_dims[d] (shape[d] is that axis's size): a load of the descriptor is a
    load of the tensor, so the tensor's preconditions cover it and launches reading it either way compare."""
    if len(block) != len(shape):
        raise ValueError(f"descriptor block {block} and shape {shape} differ in rank")
    if view_of and sorted(view_dims) != list(range(len(shape))):
        raise ValueError(f"descriptor view of {view_of}: view_dims {view_dims} must order the {len(shape)} axes")
    return TensorSpec(tensor(shape, strides, dtype).shape, tuple(strides), dtype, tuple(str(b) for b in block),
                      view_of, tuple(view_dims))


def scalar(dtype: str = "int32") -> ScalarSpec:
    return ScalarSpec(dtype)


def goal(name: str, *, same: tuple[str, ...] | list[str] = (), pre: tuple[str, ...] | list[str] = (),
         post: tuple[str, ...] | list[str] = (), witness: dict[str, dict[str, str]] | None = None,
         when: str = "", across: tuple[str, ...] | list[str] = (), right_when: str = "") -> Goal:
    """witness: optional writer of a selected output element, per side ("L"/"R"): {"pid0": expr,
    "lane0": expr, ...} in terms of the goal's free variables and `e0, e1, ...` (the element's coordinates);
    it only helps the coverage proof (which checks it), it is never trusted.
    across: constexprs (tile sizes) whose values may differ between the left and the right launch; the goal
    is then also proved for pairs of configs (`check_goal(..., right_config=...)`), e.g. a decode launch's
    tiles against a prefill launch's. Trusted there: a tl.dot element depends on its row and column operands
    and the reduction length only, not on the tile shape or the warps (equal per-element MMA chains).
    right_when: with `across`, the goal is proved on the catalog's pairs whose left config meets `when` and whose
    right config meets this (one kernel's launch modes chained pair by pair)."""
    w = tuple((side, var, expr) for side, d in (witness or {}).items() for var, expr in d.items())
    return Goal(name, tuple(same), tuple(pre), tuple(post), w, when, tuple(across), right_when)


def contract(*, params: dict[str, Union[TensorSpec, ScalarSpec]], grid: tuple[str, ...] | list[str],
             verif: list[Goal] | tuple[Goal, ...], configs: Any = None, symbolic: tuple[str, ...] = (),
             assume: tuple[str, ...] = (), bounds: tuple[str, ...] = ()) -> Callable[[Any], Any]:
    """symbolic/assume: integer constexprs the proof keeps symbolic (one proof for every config whose
    values satisfy `assume`), e.g. symbolic=("BLOCK_N",), assume=("BLOCK_N >= 16", "BLOCK_N % 16 == 0").
    bounds: facts about the sizes of every launch (`"(HQ - 1) * L.stride_qh < 2**31"`) that the memory
    obligations (int-overflow, int-division, store-in-bounds; vosti_plugin/verifier/memory.py) may assume; the
    relational proof does not see them (they are often non-linear and would slow it)."""
    spec = Contract(tuple(params.items()), tuple(str(g) for g in grid), tuple(verif), configs, tuple(symbolic),
                    tuple(assume), tuple(bounds))

    def attach(kernel: Any) -> Any:
        try:
            setattr(kernel, "__vosti_contract__", spec)
        except (AttributeError, TypeError):  # pragma: no cover - objects refusing attributes
            _DETACHED[id(kernel)] = spec
        return kernel

    return attach


_DETACHED: dict[int, Contract] = {}


def contract_of(kernel: Any) -> Contract | None:
    spec = getattr(kernel, "__vosti_contract__", None)
    return spec if spec is not None else _DETACHED.get(id(kernel))


__all__ = ["contract", "tensor", "scalar", "goal", "contract_of", "Contract", "Goal", "TensorSpec",
           "ScalarSpec"]
_ = field
