"""Contract expressions (strings in `@contract(...)`) -> Z3 hypotheses, equal regions and goals."""
from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from typing import Any, Optional, Union

import z3

from vosti_plugin.verifier.contracts import Contract, ScalarSpec, TensorSpec

_bound_ids = itertools.count()


class ContractError(Exception):
    pass


@dataclass(frozen=True, eq=False)
class Point:
    at: z3.ArithRef


@dataclass(frozen=True, eq=False)
class Slice:
    lo: z3.ArithRef
    hi: z3.ArithRef


Index = Union[Point, Slice]


@dataclass(frozen=True, eq=False)
class RegionEq:
    """For all bound vars with cond: L.tensor[left] == R.tensor[right] (slices paired in order)."""

    tensor: str
    bound: tuple[z3.ArithRef, ...]
    cond: z3.BoolRef
    left: tuple[Index, ...]
    right: tuple[Index, ...]
    text: str


@dataclass(frozen=True, eq=False)
class Fed:
    """For all bound vars with cond: R reads at tensor[right] what L stored at tensor[left] (the right
    launch runs after the left one on its output: L.T is L's stored value there, R.T is R's input)."""

    tensor: str
    bound: tuple[z3.ArithRef, ...]
    cond: z3.BoolRef
    left: tuple["Point", ...]
    right: tuple["Point", ...]
    text: str


@dataclass(frozen=True, eq=False)
class Only:
    tensor: str
    side: str
    bound: tuple[z3.ArithRef, ...]
    cond: z3.BoolRef
    index: tuple[Index, ...]
    text: str


@dataclass(frozen=True, eq=False)
class Finite:
    """For all bound vars with cond: every element of side.tensor[index] is finite (not inf or NaN)."""

    tensor: str
    side: str
    bound: tuple[z3.ArithRef, ...]
    cond: z3.BoolRef
    index: tuple[Index, ...]
    text: str


Clause = Union[z3.BoolRef, RegionEq, Only, Finite, Fed]


def _forall(vs: list, cond: z3.BoolRef, body: z3.BoolRef) -> z3.BoolRef:
    """forall vs. cond => body, with nested foralls merged into one (Z3 instantiates those far better)."""
    if z3.is_quantifier(body) and body.is_forall() and body.num_vars() >= 1:
        inner_vs = [z3.Const(body.var_name(i), body.var_sort(i)) for i in range(body.num_vars())]
        inner = z3.substitute_vars(body.body(), *reversed(inner_vs))
        if z3.is_implies(inner):
            return _forall(vs + inner_vs, z3.And(cond, inner.arg(0)), inner.arg(1))
    return z3.ForAll(vs, z3.Implies(cond, body))


class SpecParser:
    def __init__(self, contract: Contract, config: dict[str, Any], same: set[str], kernel_params: list[str],
                 constexprs: set[str], symbolic: frozenset = frozenset(), right_config: dict[str, Any] | None = None):
        self.c = contract
        self.symbolic = symbolic
        self.config = config
        # a cross-config goal: each launch has its own constexprs; a name whose values differ must be read
        # through a side (L.X / R.X, or an expression with a default side: grid, shapes, witnesses)
        self.configs = {"L": config, "R": config if right_config is None else right_config}
        self.differs = {n for n in set(config) | set(self.configs["R"])
                        if config.get(n) != self.configs["R"].get(n)}
        self.same = set(same)
        self.params = set(kernel_params)
        self.constexprs = constexprs
        self.shape_symbols: set[str] = set()
        for _n, spec in contract.params:
            if isinstance(spec, TensorSpec):
                for s in spec.shape:
                    for node in ast.walk(ast.parse(s, mode="eval")):
                        if isinstance(node, ast.Name) and node.id not in constexprs and node.id not in config:
                            self.shape_symbols.add(node.id)
        self.text = ""

    # -- symbols -------------------------------------------------------------------------------------
    def side_var(self, name: str, side: str) -> z3.ArithRef:
        if name in self.symbolic:
            return z3.Int(name)
        config = self.configs[side]
        if name in config and name not in self.params - self.constexprs:
            return z3.IntVal(int(config[name]))
        if name in self.constexprs:
            return z3.IntVal(int(config[name]))
        return z3.Int(name if name in self.same else f"{name}@{side}")

    def int_fn(self, tensor: str, side: str) -> z3.FuncDeclRef:
        rank = len(self.c.tensors[tensor].shape)
        return z3.Function(f"{tensor}@{side}", *([z3.IntSort()] * rank), z3.IntSort())

    def shape(self, tensor: str, side: str) -> tuple[z3.ArithRef, ...]:
        spec = self.c.tensors[tensor]
        return tuple(self.expr(ast.parse(s, mode="eval").body, {}, default_side=side) for s in spec.shape)

    def int_symbols(self) -> list[str]:
        """Non-negative integer symbols: integer scalar params and shape symbols (not strides)."""
        strides = {s for _n, t in self.c.params if isinstance(t, TensorSpec) for s in t.strides if isinstance(s, str)}
        out = []
        for p in sorted(self.params - self.constexprs):
            spec = self.c.param(p)
            if spec is None or (isinstance(spec, ScalarSpec) and not spec.is_float):
                if p not in strides and p not in self.config:
                    out.append(p)
        return out + sorted(self.shape_symbols - set(out))  # a dimension used as a stride is still a size

    def stride_symbols(self) -> list[str]:
        """Integer parameters that occur in some tensor stride (a name of a product stride counts)."""
        names = {x.strip() for _n, t in self.c.params if isinstance(t, TensorSpec) for s in t.strides
                 if isinstance(s, str) for x in s.split("*")}
        return sorted(n for n in names if n in self.params - self.constexprs and n not in self.config)

    # -- parsing -------------------------------------------------------------------------------------
    def fail(self, msg: str) -> ContractError:
        return ContractError(f"{msg} in contract clause {self.text!r}")

    def clause(self, text: str) -> Clause:
        self.text = text
        node = ast.parse(text, mode="eval").body
        return self.clause_node(node, {}, [], z3.BoolVal(True))

    def side_clause(self, text: str, side: str) -> z3.BoolRef:
        """A fact about one launch (an `assume` clause): bare names read that launch's constexprs."""
        self.text = text
        return self.expr(ast.parse(text, mode="eval").body, {}, side)

    def clause_node(self, node: ast.AST, env: dict, bound: list, cond: z3.BoolRef) -> Clause:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "forall":
            if len(node.args) != 3 or not isinstance(node.args[0], ast.Name):
                raise self.fail("forall(var, cond, clause) expected")
            v = z3.Int(f"{node.args[0].id}#{next(_bound_ids)}")
            env2 = dict(env)
            env2[node.args[0].id] = v
            c2 = z3.And(cond, self.boolean(node.args[1], env2))
            # the innermost clause quantifies every bound variable under all the conditions at once
            return self.clause_node(node.args[2], env2, bound + [v], c2)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "only":
            side, tensor, idx = self.region(node.args[0], env)
            return Only(tensor, side, tuple(bound), cond, idx, self.text)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "fed":
            if len(node.args) != 2:
                raise self.fail("fed(L.T[...], R.T[...]) expected")
            sl, tl_, il = self.region(node.args[0], env)
            sr, tr, ir_ = self.region(node.args[1], env)
            if (sl, sr) != ("L", "R") or tl_ != tr or not all(isinstance(i, Point) for i in il + ir_):
                raise self.fail("fed(...) reads `fed(L.T[i, ...], R.T[j, ...])`: one tensor, single elements")
            return Fed(tl_, tuple(bound), cond, il, ir_, self.text)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "finite":
            side, tensor, idx = self.region(node.args[0], env)
            if not self.c.tensors[tensor].is_float:
                raise self.fail("finite(...) of an integer tensor")
            return Finite(tensor, side, tuple(bound), cond, idx, self.text)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            l, r = node.left, node.comparators[0]
            if self.is_float_region(l) or self.is_float_region(r):
                sl, tl, il = self.region(l, env)
                sr, tr, ir_ = self.region(r, env)
                if (sl, sr) != ("L", "R") or tl != tr:
                    raise self.fail("region equality must read `L.T[...] == R.T[...]` on the same tensor")
                if sum(isinstance(i, Slice) for i in il) != sum(isinstance(i, Slice) for i in ir_):
                    raise self.fail("both sides of a region equality need the same number of slices")
                return RegionEq(tl, tuple(bound), cond, il, ir_, self.text)
            if self.is_int_region(l) and self.has_slices(l):
                sl, tl, il = self.region(l, env)
                sr, tr, ir_ = self.region(r, env)
                return self.int_region_eq(tl, sl, il, tr, sr, ir_, cond, bound)
        b = self.boolean(node, env)
        return z3.ForAll(bound, z3.Implies(cond, b)) if bound else b

    def int_region_eq(self, tl, sl, il, tr, sr, ir_, cond, bound) -> z3.BoolRef:
        vs, cl, cr, rng = [], [], [], []
        it = iter([i for i in ir_ if isinstance(i, Slice)])
        for i in il:
            if isinstance(i, Point):
                cl.append(i.at)
            else:
                v = z3.Int(f"_s#{next(_bound_ids)}")
                vs.append(v)
                cl.append(i.lo + v)
                rng.append(z3.And(0 <= v, v < i.hi - i.lo))
                j = next(it)
                cr_v = j.lo + v
                cr.append(("slice", cr_v))
        crs = []
        slices = iter(cr)
        for i in ir_:
            crs.append(i.at if isinstance(i, Point) else next(slices)[1])
        eq = self.int_fn(tl, sl)(*cl) == self.int_fn(tr, sr)(*crs)
        body = z3.Implies(z3.And(cond, *rng), eq)
        allv = list(bound) + vs
        return z3.ForAll(allv, body) if allv else body

    def is_float_region(self, node: ast.AST) -> bool:
        t = self.region_tensor(node)
        return t is not None and self.c.tensors[t].is_float

    def is_int_region(self, node: ast.AST) -> bool:
        t = self.region_tensor(node)
        return t is not None and not self.c.tensors[t].is_float

    @staticmethod
    def has_slices(node: ast.AST) -> bool:
        return isinstance(node, ast.Subscript) and any(isinstance(x, ast.Slice) for x in ast.walk(node.slice))

    def region_tensor(self, node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id in ("L", "R") \
                and node.value.attr in self.c.tensors:
            return node.value.attr
        return None

    def region(self, node: ast.AST, env: dict) -> tuple[str, str, tuple[Index, ...]]:
        t = self.region_tensor(node)
        if t is None:
            raise self.fail(f"expected L.T[...] or R.T[...], got {ast.unparse(node)!r}")
        side = node.value.value.id
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        shape = self.shape(t, side)
        if len(elts) != len(shape):
            raise self.fail(f"{t} has rank {len(shape)}")
        out: list[Index] = []
        for d, el in enumerate(elts):
            if isinstance(el, ast.Slice):
                if el.step is not None:
                    raise self.fail("strided slices")
                lo = self.expr(el.lower, env, side) if el.lower is not None else z3.IntVal(0)
                hi = self.expr(el.upper, env, side) if el.upper is not None else shape[d]
                out.append(Slice(lo, hi))
            else:
                out.append(Point(self.expr(el, env, None)))
        return side, t, tuple(out)

    def boolean(self, node: ast.AST, env: dict) -> z3.BoolRef:
        e = self.expr(node, env, None)
        if not isinstance(e, z3.BoolRef):
            raise self.fail(f"{ast.unparse(node)!r} is not a condition")
        return e

    def expr(self, node: ast.AST, env: dict, default_side: Optional[str]) -> Any:
        ex = lambda n: self.expr(n, env, default_side)  # noqa: E731
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return z3.BoolVal(node.value)
            if isinstance(node.value, int):
                return z3.IntVal(node.value)
            raise self.fail(f"constant {node.value!r}")
        if isinstance(node, ast.Name):
            n = node.id
            if n in env:
                return env[n]
            if n in self.symbolic:
                return z3.Bool(n) if isinstance(self.config.get(n), bool) else z3.Int(n)
            config = self.config
            if n in self.differs:
                if default_side is None:
                    raise self.fail(f"{n} differs between the two launches' configs: write L.{n} or R.{n}")
                config = self.configs[default_side]
            if n in self.constexprs and isinstance(config.get(n), bool):
                return z3.BoolVal(bool(config[n]))
            if n in self.constexprs or (n in config and n not in self.params):
                return z3.IntVal(int(config[n]))
            if n in self.same:
                return z3.Int(n)
            if n in self.params or n in self.shape_symbols:
                if default_side is not None:
                    return self.side_var(n, default_side)
                raise self.fail(f"{n} differs between invocations: write L.{n} or R.{n}, or list it in same")
            return z3.Int(n)  # a free variable of the goal
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("L", "R"):
            return self.side_var(node.attr, node.value.id)
        if isinstance(node, ast.Subscript):
            t = self.region_tensor(node)
            if t is None or self.c.tensors[t].is_float:
                raise self.fail(f"{ast.unparse(node)!r}: only integer tensors can be read in expressions")
            side = node.value.value.id
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return self.int_fn(t, side)(*[self.expr(x, env, None) for x in elts])
        if isinstance(node, ast.BinOp):
            a, b = ex(node.left), ex(node.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a / b, ast.Mod: lambda: a % b}
            if isinstance(node.op, ast.Pow):
                if not (z3.is_int_value(a) and z3.is_int_value(b)):
                    raise self.fail("** of non-constants")
                return z3.IntVal(a.as_long() ** b.as_long())
            for k, f in ops.items():
                if isinstance(node.op, k):
                    return f()
            raise self.fail(f"operator {type(node.op).__name__}")
        if isinstance(node, ast.UnaryOp):
            v = ex(node.operand)
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.Not):
                return z3.Not(v)
            raise self.fail("unary operator")
        if isinstance(node, ast.BoolOp):
            vs = [ex(v) for v in node.values]
            return z3.And(*vs) if isinstance(node.op, ast.And) else z3.Or(*vs)
        if isinstance(node, ast.Compare):
            parts, left = [], ex(node.left)
            for op, rn in zip(node.ops, node.comparators):
                right = ex(rn)
                f = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
                     ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}
                parts.append(next(fn for k, fn in f.items() if isinstance(op, k))(left, right))
                left = right
            return z3.And(*parts) if len(parts) > 1 else parts[0]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = node.func.id
            if fn == "cdiv":
                a, b = ex(node.args[0]), ex(node.args[1])
                return (a + b - 1) / b
            if fn in ("min", "max"):
                a, b = ex(node.args[0]), ex(node.args[1])
                return z3.If(a <= b, a, b) if fn == "min" else z3.If(a >= b, a, b)
            if fn == "ite":
                return z3.If(ex(node.args[0]), ex(node.args[1]), ex(node.args[2]))
            if fn == "implies":
                return z3.Implies(ex(node.args[0]), ex(node.args[1]))
            if fn == "forall":
                v = z3.Int(f"{node.args[0].id}#{next(_bound_ids)}")
                env2 = dict(env)
                env2[node.args[0].id] = v
                return _forall([v], self.expr(node.args[1], env2, default_side),
                               self.expr(node.args[2], env2, default_side))
        raise self.fail(f"expression {ast.unparse(node)!r}")
