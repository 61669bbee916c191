"""Python source of a `@triton.jit` kernel -> `ir.Kernel`.

Only the subset listed in `SUPPORTED_TL` and the statement forms below are accepted; anything else raises
`Unsupported` naming the kernel and the source line, so a kernel is never silently half-understood.
Helper `@triton.jit` functions called from a kernel are inlined when their body is straight-line code that
ends in a single `return`. Consecutive loops over ranges [b0, b1), [b1, b2), ... (one name, each stop written
as the next start, no bound assigned in a body) are read as one loop over [b0, bn) whose body branches on the
index, under the obligation `loop-concat` (b0 <= b1 <= ... <= bn): a peeled loop is proved as the loop it splits.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from vosti_plugin.verifier import ir, serial

MATH_FNS = {
    "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "tanh", "abs", "sigmoid", "erf", "cos", "sin",
    "maximum", "minimum", "fma", "cdiv", "div_rn", "fdiv", "floor", "ceil", "clamp", "umulhi",
}
REDUCE_FNS = {"sum": "sum", "max": "max", "min": "min"}
IDENTITY_HINTS = {"multiple_of", "max_contiguous", "assume_aligned"}
IGNORED_CALLS = {"static_assert", "static_print", "device_assert", "assume"}
KNOWN_UNSUPPORTED = {
    "atomic_add": "atomic accumulation makes the result depend on the order programs run in",
    "atomic_max": "atomic accumulation makes the result depend on the order programs run in",
    "atomic_min": "atomic accumulation makes the result depend on the order programs run in",
    "atomic_cas": "atomics are outside the verified subset",
    "atomic_xchg": "atomics are outside the verified subset",
    "atomic_and": "atomics are outside the verified subset",
    "atomic_or": "atomics are outside the verified subset",
    "atomic_xor": "atomics are outside the verified subset",
    "inline_asm_elementwise": "inline assembly is opaque to the verifier",
    "rand": "random numbers are not deterministic functions of the inputs",
    "randn": "random numbers are not deterministic functions of the inputs",
    "debug_barrier": "barriers are outside the verified subset",
    "make_block_ptr": "block pointers are outside the verified subset (use pointer arithmetic + masks)",
    "advance": "block pointers are outside the verified subset",
    "histogram": "histograms are outside the verified subset",
    "cumsum": "scans are outside the verified subset",
    "associative_scan": "scans are outside the verified subset",
    "reduce": "custom reductions are outside the verified subset",
    "sort": "sorting is outside the verified subset",
    "view": "view is outside the verified subset",
    "join": "join is outside the verified subset",
    "split": "split is outside the verified subset",
    "num_programs": "num_programs makes a program depend on the launch size",
}
DTYPES = {"float32", "float16", "bfloat16", "float64", "int32", "int64", "int8", "int16", "uint8", "int1",
          "uint32", "uint64", "float8e4nv", "float8e5"}
TL_PREFIXES = ("tl", "triton.language", "tl.math", "triton.language.math", "libdevice", "tl.extra.cuda.libdevice",
               "triton.language.extra.cuda.libdevice", "tl.extra.libdevice", "triton.language.extra.libdevice")


class Unsupported(Exception):
    """A construct outside the verified subset. `line` is the line in the kernel's file."""

    def __init__(self, kernel: str, line: int, what: str, filename: str = ""):
        self.kernel, self.line, self.what, self.filename = kernel, line, what, filename
        super().__init__(f"{kernel}:{line}: unsupported: {what}")


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


class _Translator:
    def __init__(self, kernel_name: str, line_offset: int, filename: str, globals_: dict[str, Any],
                 prefix: str = "", depth: int = 0):
        self.kernel = kernel_name
        self.off = line_offset
        self.filename = filename
        self.globals = globals_
        self.prefix = prefix  # renaming of locals when inlining helpers
        self.depth = depth
        self.locals: set[str] = set()
        self.params: set[str] = set()  # the kernel's parameters (not an inlined helper's)
        self.pre_stmts: list[ir.Stmt] = []  # statements produced by inlined helpers
        self._inline_count = 0

    # -- helpers ---------------------------------------------------------------------------------------
    def line(self, node: ast.AST) -> int:
        return self.off + getattr(node, "lineno", 1) - 1

    def fail(self, node: ast.AST, what: str) -> Unsupported:
        return Unsupported(self.kernel, self.line(node), what, self.filename)

    def rename(self, name: str) -> str:
        return self.prefix + name if self.prefix and name in self.locals else name

    # -- statements ------------------------------------------------------------------------------------
    def stmts(self, body: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in _concatenated_loops(body):
            for t in self.stmt(s):
                out.extend(self.pre_stmts)
                self.pre_stmts = []
                out.append(t)
            out.extend(self.pre_stmts)
            self.pre_stmts = []
        return tuple(out)

    def _assign_target(self, target: ast.AST, value: ir.Expr, node: ast.AST) -> list[ir.Stmt]:
        if isinstance(target, ast.Name):
            self.locals.add(target.id)
            return [ir.Assign(self.rename(target.id), value, self.line(node))]
        raise self.fail(node, f"assignment target {ast.unparse(target)!r}")

    def stmt(self, s: ast.stmt) -> list[ir.Stmt]:
        ln = self.line(s)
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                return []  # docstring
            if isinstance(s.value, ast.Call):
                name = self.tl_name(s.value.func)
                if name == "store":
                    return [self.store(s.value)]
                if name in IGNORED_CALLS:
                    return []
                self.expr(s.value)  # raises for unknown/unsupported calls
                raise self.fail(s, f"expression statement {ast.unparse(s)!r} with an effect")
            raise self.fail(s, f"expression statement {ast.unparse(s)!r}")
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise self.fail(s, "chained assignment")
            tgt = s.targets[0]
            if isinstance(tgt, ast.Tuple):
                if isinstance(s.value, ast.Tuple) and len(s.value.elts) == len(tgt.elts):
                    values = [self.expr(v) for v in s.value.elts]
                    out = []
                    for t, v in zip(tgt.elts, values):
                        out += self._assign_target(t, v, s)
                    return out
                if isinstance(s.value, ast.Call):
                    values = self.inline_call(s.value, want=len(tgt.elts))
                    out = []
                    for t, v in zip(tgt.elts, values):
                        out += self._assign_target(t, v, s)
                    return out
                raise self.fail(s, f"tuple assignment {ast.unparse(s)!r}")
            return self._assign_target(tgt, self.expr(s.value), s)
        if isinstance(s, ast.AnnAssign):
            if s.value is None:
                return []
            return self._assign_target(s.target, self.expr(s.value), s)
        if isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name):
                raise self.fail(s, "augmented assignment to a non-name")
            op = self.binop_name(s.op, s)
            cur = ir.Name(self.rename(s.target.id), ln)
            return self._assign_target(s.target, ir.BinOp(op, cur, self.expr(s.value), ln), s)
        if isinstance(s, ast.For):
            return [self.for_(s)]
        if isinstance(s, _ConcatenatedLoops):
            ordered = ast.copy_location(ast.Compare(left=s.bounds[0], ops=[ast.LtE()] * (len(s.bounds) - 1),
                                                    comparators=list(s.bounds[1:])), s.loop)
            check = ir.Check(self.expr(ordered), "loop-concat", "the consecutive loops' bounds "
                             f"{' <= '.join(ast.unparse(b) for b in s.bounds)} are ordered (the loops then visit "
                             "one range in order)", ln)
            return [check, self.for_(s.loop)]
        if isinstance(s, ast.If):
            return [ir.If(self.expr(s.test), self.stmts(s.body), self.stmts(s.orelse), ln)]
        if isinstance(s, ast.Return):
            if s.value is not None and self.depth == 0:
                raise self.fail(s, "a kernel returning a value")
            return [ir.Return(ln)]
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.While):
            raise self.fail(s, "while loop (only `for` over a range is verified)")
        if isinstance(s, (ast.Break, ast.Continue)):
            raise self.fail(s, f"{type(s).__name__.lower()} inside a loop")
        raise self.fail(s, f"statement {type(s).__name__}")

    def for_(self, s: ast.For) -> ir.For:
        ln = self.line(s)
        if s.orelse:
            raise self.fail(s, "for-else")
        if not isinstance(s.target, ast.Name):
            raise self.fail(s, "loop target must be a single name")
        it = s.iter
        if not isinstance(it, ast.Call) or self.range_name(it.func) is None:
            raise self.fail(s, f"loop over {ast.unparse(it)!r} (only range/tl.range/tl.static_range)")
        args = [self.expr(a) for a in it.args]
        for kw in it.keywords:
            if kw.arg not in ("num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten",
                              "warp_specialize"):
                raise self.fail(s, f"range keyword {kw.arg}")
        one, zero = ir.Const(1, ln), ir.Const(0, ln)
        if len(args) == 1:
            start, stop, step = zero, args[0], one
        elif len(args) == 2:
            start, stop, step = args[0], args[1], one
        elif len(args) == 3:
            start, stop, step = args
        else:
            raise self.fail(s, "range arity")
        self.locals.add(s.target.id)
        return ir.For(self.rename(s.target.id), start, stop, step, self.stmts(s.body), ln)

    def range_name(self, func: ast.AST) -> str | None:
        d = _dotted(func)
        if d == "range":
            return "range"
        name = self.tl_name(func)
        return name if name in ("range", "static_range") else None

    def store(self, call: ast.Call) -> ir.Store:
        args = list(call.args)
        kws = {k.arg: k.value for k in call.keywords}
        ptr = args[0] if args else kws.pop("pointer", None)
        value = args[1] if len(args) > 1 else kws.pop("value", None)
        mask = args[2] if len(args) > 2 else kws.pop("mask", None)
        for k in kws:
            if k in ("boundary_check",):
                raise self.fail(call, "store with boundary_check (block pointers)")
            if k not in ("mask", "cache_modifier", "eviction_policy"):
                raise self.fail(call, f"tl.store keyword {k}")
        if ptr is None or value is None:
            raise self.fail(call, "tl.store arguments")
        return ir.Store(self.expr(ptr), self.expr(value), self.expr(mask) if mask is not None else None,
                        self.line(call))

    # -- expressions -----------------------------------------------------------------------------------
    def tl_name(self, func: ast.AST) -> str | None:
        d = _dotted(func)
        if d is None:
            return None
        for p in sorted(TL_PREFIXES, key=len, reverse=True):
            if d.startswith(p + "."):
                return d[len(p) + 1:]
        if d == "triton.cdiv":
            return "cdiv"
        return None

    def math_library(self, func: ast.AST) -> str:
        """'libdevice' for libdevice calls (a different implementation from tl.exp / tl.math.exp, so a
        different operation), '' for Triton's own math."""
        d = _dotted(func) or ""
        head = d.rsplit(".", 1)[0] if "." in d else ""
        if head in ("libdevice", "tl.extra.cuda.libdevice", "triton.language.extra.cuda.libdevice",
                    "tl.extra.libdevice", "triton.language.extra.libdevice"):
            return "libdevice"
        g = self.globals.get(head.split(".")[0]) if head else None
        if g is not None and "libdevice" in getattr(g, "__name__", ""):
            return "libdevice"
        return ""

    @staticmethod
    def binop_name(op: ast.AST, node) -> str:
        table = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
                 ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "lshift",
                 ast.RShift: "rshift"}
        for k, v in table.items():
            if isinstance(op, k):
                return v
        raise Unsupported("?", getattr(node, "lineno", 0), f"operator {type(op).__name__}")

    def expr(self, e: ast.AST) -> ir.Expr:
        ln = self.line(e)
        if isinstance(e, ast.Constant):
            if isinstance(e.value, (int, float, bool, str)) or e.value is None:
                return ir.Const(e.value, ln)  # a str is a dtype name or an option such as "ieee"
            raise self.fail(e, f"constant {e.value!r}")
        if isinstance(e, ast.Name):
            if e.id in self.locals:
                return ir.Name(self.rename(e.id), ln)
            if e.id in ("True", "False"):
                return ir.Const(e.id == "True", ln)
            g = self.globals.get(e.id, _MISSING)
            if g is not _MISSING and isinstance(g, (int, float, bool)) and not isinstance(g, type):
                return ir.Const(g, ln)
            if g is not _MISSING and hasattr(g, "value") and isinstance(getattr(g, "value"), (int, float, bool)):
                return ir.Const(g.value, ln)  # tl.constexpr global
            return ir.Name(e.id, ln)
        if isinstance(e, ast.BinOp):
            return ir.BinOp(self.binop_name(e.op, e), self.expr(e.left), self.expr(e.right), ln)
        if isinstance(e, ast.UnaryOp):
            if isinstance(e.op, ast.USub):
                return ir.UnaryOp("neg", self.expr(e.operand), ln)
            if isinstance(e.op, ast.UAdd):
                return self.expr(e.operand)
            if isinstance(e.op, ast.Not):
                return ir.UnaryOp("not", self.expr(e.operand), ln)
            if isinstance(e.op, ast.Invert):
                return ir.UnaryOp("invert", self.expr(e.operand), ln)
        if isinstance(e, ast.BoolOp):
            op = "and" if isinstance(e.op, ast.And) else "or"
            acc = self.expr(e.values[0])
            for v in e.values[1:]:
                acc = ir.BinOp(op, acc, self.expr(v), ln)
            return acc
        if isinstance(e, ast.Compare):
            if len(e.ops) != 1:
                # a < b < c
                parts, left = [], e.left
                for op, right in zip(e.ops, e.comparators):
                    parts.append(ir.Compare(self.cmp_name(op, e), self.expr(left), self.expr(right), ln))
                    left = right
                acc = parts[0]
                for p in parts[1:]:
                    acc = ir.BinOp("and", acc, p, ln)
                return acc
            return ir.Compare(self.cmp_name(e.ops[0], e), self.expr(e.left), self.expr(e.comparators[0]), ln)
        if isinstance(e, ast.IfExp):
            return ir.IfExp(self.expr(e.test), self.expr(e.body), self.expr(e.orelse), ln)
        if isinstance(e, ast.Subscript):
            return self.subscript(e)
        if isinstance(e, ast.Attribute):
            return self.attribute(e)
        if isinstance(e, ast.Call):
            return self.call(e)
        raise self.fail(e, f"expression {ast.unparse(e)!r}")

    def cmp_name(self, op: ast.AST, node) -> str:
        table = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
        for k, v in table.items():
            if isinstance(op, k):
                return v
        raise self.fail(node, f"comparison {type(op).__name__}")

    def subscript(self, e: ast.Subscript) -> ir.Expr:
        idx = e.slice
        elts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
        pattern: list[str | None] = []
        for el in elts:
            if isinstance(el, ast.Slice) and el.lower is None and el.upper is None and el.step is None:
                pattern.append(":")
            elif isinstance(el, ast.Constant) and el.value is None:
                pattern.append(None)
            else:
                raise self.fail(e, f"indexing {ast.unparse(e)!r} (only [:, None]-style broadcasting)")
        return ir.Subscript(self.expr(e.value), tuple(pattern), self.line(e))

    def attribute(self, e: ast.Attribute) -> ir.Expr:
        ln = self.line(e)
        d = _dotted(e)
        if d is not None:
            name = self.tl_name(e)
            if name in DTYPES:
                return ir.Const(name, ln)
        if e.attr == "element_ty" and isinstance(e.value, ast.Attribute) and e.value.attr == "dtype" \
                and isinstance(e.value.value, ast.Name):
            return ir.DtypeOf(e.value.value.id, ln)
        if e.attr == "T":
            return ir.Trans(self.expr(e.value), ln)
        if e.attr == "dtype":
            return ir.TileDtype(self.expr(e.value), ln)
        raise self.fail(e, f"attribute {ast.unparse(e)!r}")

    def _args(self, call: ast.Call, names: list[str], required: int) -> list[ast.AST | None]:
        kws = {k.arg: k.value for k in call.keywords}
        out: list[ast.AST | None] = []
        for i, n in enumerate(names):
            if i < len(call.args):
                out.append(call.args[i])
            else:
                out.append(kws.pop(n, None))
        if len(call.args) > len(names):
            raise self.fail(call, f"too many arguments to {ast.unparse(call.func)}")
        if any(a is None for a in out[:required]):
            raise self.fail(call, f"missing arguments to {ast.unparse(call.func)}")
        self._extra_kws = kws
        return out

    def call(self, e: ast.Call) -> ir.Expr:
        ln = self.line(e)
        d = _dotted(e.func)
        if d in ("min", "max") and len(e.args) == 2 and not e.keywords:
            return ir.Math(d, (self.expr(e.args[0]), self.expr(e.args[1])), ln)
        if d == "float" and len(e.args) == 1 and isinstance(e.args[0], ast.Constant) \
                and isinstance(e.args[0].value, str):
            return ir.Const(float(e.args[0].value), ln)
        if d in ("int", "float") and len(e.args) == 1:
            return self.expr(e.args[0])
        if isinstance(e.func, ast.Attribute) and e.func.attr == "to" and self.tl_name(e.func) is None:
            args = self._args(e, ["dtype", "fp_downcast_rounding", "bitcast"], 1)
            return self.cast(e, self.expr(e.func.value), args[0], args[1], args[2])
        name = self.tl_name(e.func)
        if name is None and isinstance(e.func, ast.Attribute) and e.func.attr in ("load", "store") \
                and isinstance(e.func.value, ast.Name) and e.func.value.id in self.locals:
            return self.descriptor_load(e)
        if name is None and isinstance(e.func, ast.Attribute) and e.func.attr in ("trans",):
            return ir.Trans(self.expr(e.func.value), ln)
        if name is None and isinstance(e.func, ast.Attribute) and e.func.attr == "reshape":
            return self.reshape(e, e.func.value, list(e.args))
        if name is None:
            if d is not None and d in self.globals and _is_jit(self.globals[d]):
                (value,) = self.inline_call(e, want=1)
                return value
            raise self.fail(e, f"call to {ast.unparse(e.func)!r} (unknown function)")
        if name in KNOWN_UNSUPPORTED:
            raise self.fail(e, f"tl.{name}: {KNOWN_UNSUPPORTED[name]}")
        if name == "program_id":
            (axis,) = self._args(e, ["axis"], 1)
            if not isinstance(axis, ast.Constant):
                raise self.fail(e, "program_id with a non-constant axis")
            return ir.ProgramId(int(axis.value), ln)
        if name == "arange":
            a, b = self._args(e, ["start", "end"], 2)
            return ir.Arange(self.expr(a), self.expr(b), ln)
        if name in ("zeros", "full"):
            if name == "zeros":
                shape, dtype = self._args(e, ["shape", "dtype"], 2)
                value = ast.Constant(0, lineno=e.lineno)
            else:
                shape, value, dtype = self._args(e, ["shape", "value", "dtype"], 3)
            dims = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
            dt = self.expr(dtype)
            if not isinstance(dt, ir.Const) or not isinstance(dt.value, str):
                raise self.fail(e, "tl.full/zeros dtype must be a tl dtype")
            return ir.Full(tuple(self.expr(x) for x in dims), self.expr(value), dt.value, ln)
        if name == "load":
            ptr, mask, other = self._args(e, ["pointer", "mask", "other"], 1)
            for k in self._extra_kws:
                if k == "boundary_check" or k == "padding_option":
                    raise self.fail(e, "tl.load with boundary_check (block pointers)")
                if k not in ("cache_modifier", "eviction_policy", "volatile"):
                    raise self.fail(e, f"tl.load keyword {k}")
            return ir.Load(self.expr(ptr), self.expr(mask) if mask is not None else None,
                           self.expr(other) if other is not None else None, ln)
        if name == "where":
            c, a, b = self._args(e, ["condition", "x", "y"], 3)
            return ir.Where(self.expr(c), self.expr(a), self.expr(b), ln)
        if name in REDUCE_FNS:
            x, axis = self._args(e, ["input", "axis"], 1)
            for k in self._extra_kws:
                if k not in ("keep_dims",) or getattr(self._extra_kws[k], "value", False):
                    raise self.fail(e, f"tl.{name} keyword {k}")
            if axis is None or not isinstance(axis, ast.Constant):
                if axis is not None and isinstance(axis, ast.UnaryOp):
                    raise self.fail(e, f"tl.{name} with a negative axis")
                raise self.fail(e, f"tl.{name} without a constant axis")
            return ir.Reduce(REDUCE_FNS[name], self.expr(x), int(axis.value), ln)
        if name == "dot":
            a, b, acc, prec, tf32, out_dt = self._args(e, ["input", "other", "acc", "input_precision", "allow_tf32",
                                                            "out_dtype"], 2)
            opts = []
            for k, v in (("input_precision", prec), ("allow_tf32", tf32), ("out_dtype", out_dt)):
                if v is not None:
                    opts.append((k, self.expr(v)))
            for k, v in self._extra_kws.items():
                if k == "max_num_imprecise_acc":
                    opts.append((k, self.expr(v)))
                    continue
                raise self.fail(e, f"tl.dot keyword {k}")
            return ir.Dot(self.expr(a), self.expr(b), self.expr(acc) if acc is not None else None, ln, tuple(opts))
        if name == "trans":
            (x,) = self._args(e, ["input"], 1)
            return ir.Trans(self.expr(x), ln)
        if name == "reshape":
            if not e.args:
                raise self.fail(e, "tl.reshape without a tile")
            return self.reshape(e, e.args[0], list(e.args[1:]))
        if name in IDENTITY_HINTS:
            return self.expr(e.args[0])
        if name in ("cast",):
            x, dt, rnd, bitcast = self._args(e, ["input", "dtype", "fp_downcast_rounding", "bitcast"], 2)
            return self.cast(e, self.expr(x), dt, rnd, bitcast)
        if name == "broadcast_to":
            return self.expr(e.args[0])  # shapes broadcast implicitly in the symbolic evaluator
        if name in MATH_FNS:
            args = tuple(self.expr(a) for a in e.args)
            for k in e.keywords:
                if k.arg not in ("propagate_nan",):
                    raise self.fail(e, f"tl.{name} keyword {k.arg}")
            lib = self.math_library(e.func)
            return ir.Math(f"{lib}.{name}" if lib else name, args, ln)
        raise self.fail(e, f"call to tl.{name} (outside the verified subset)")

    def reshape(self, e: ast.Call, x: ast.AST, dims: list[ast.AST]) -> ir.Reshape:
        """A reshape that adds or drops axes of size 1 (the evaluator checks that against the tile's shape)."""
        if e.keywords and any(k.arg != "can_reorder" or not (isinstance(k.value, ast.Constant) and k.value.value is False)
                              for k in e.keywords):
            raise self.fail(e, "reshape keyword other than can_reorder=False (a reordering reshape moves elements)")
        if len(dims) == 1 and isinstance(dims[0], (ast.List, ast.Tuple)):
            dims = list(dims[0].elts)
        if not dims:
            raise self.fail(e, "reshape without a shape")
        return ir.Reshape(self.expr(x), tuple(self.expr(d) for d in dims), self.line(e))

    def descriptor_load(self, e: ast.Call) -> ir.DescLoad:
        """`desc.load([o0, o1])` on a kernel parameter; the contract says whether it is a descriptor and gives
        its shape and block (the symbolic evaluator refuses a pointer parameter there)."""
        if e.func.attr == "store":
            raise self.fail(e, "tensor-descriptor stores are outside the verified subset (use tl.store)")
        if e.keywords or len(e.args) != 1 or not isinstance(e.args[0], (ast.List, ast.Tuple)):
            raise self.fail(e, "descriptor load other than desc.load([offsets])")
        if e.func.value.id not in self.params:
            raise self.fail(e, "descriptor load on a local name (only on a kernel parameter)")
        return ir.DescLoad(e.func.value.id, tuple(self.expr(o) for o in e.args[0].elts), self.line(e))

    def cast(self, e: ast.Call, x: ir.Expr, dtype: ast.AST, rounding: ast.AST | None, bitcast: ast.AST | None) \
            -> ir.Cast:
        """`.to(dtype, fp_downcast_rounding=..., bitcast=...)`: the rounding mode and bitcast are part of the
        operation (rtne and rtz casts of one value differ)."""
        for k in self._extra_kws:
            raise self.fail(e, f".to() keyword {k}")
        mode = "rtne"
        if rounding is not None:
            if not (isinstance(rounding, ast.Constant) and (rounding.value is None or isinstance(rounding.value, str))):
                raise self.fail(e, "fp_downcast_rounding must be a string literal")
            mode = rounding.value or "rtne"
        if bitcast is not None:
            if not isinstance(bitcast, ast.Constant) or not isinstance(bitcast.value, bool):
                raise self.fail(e, "bitcast must be a literal True/False")
            if bitcast.value:
                mode = "bitcast"
        return ir.Cast(x, self.expr(dtype), self.line(e), mode)

    def inline_call(self, e: ast.Call, want: int) -> list[ir.Expr]:
        d = _dotted(e.func)
        fn = self.globals.get(d) if d else None
        if fn is None or not _is_jit(fn):
            raise self.fail(e, f"call to {ast.unparse(e.func)!r} (unknown function)")
        if self.depth > 4:
            raise self.fail(e, "helper calls nested too deeply")
        py = fn.fn
        src_lines, start = inspect.getsourcelines(py)
        tree = ast.parse(textwrap.dedent("".join(src_lines)))
        fdef = tree.body[0]
        assert isinstance(fdef, ast.FunctionDef)
        self._inline_count += 1
        prefix = f"{self.prefix}{fdef.name}{self._inline_count}__"
        sub = _Translator(self.kernel, start, inspect.getsourcefile(py) or "", py.__globals__, prefix,
                          self.depth + 1)
        names = [a.arg for a in fdef.args.args]
        if len(e.args) > len(names):
            raise self.fail(e, "too many arguments to helper")
        bound: dict[str, ast.AST] = dict(zip(names, e.args))
        for k in e.keywords:
            bound[k.arg] = k.value
        defaults = fdef.args.defaults
        for n, dft in zip(names[len(names) - len(defaults):], defaults):
            bound.setdefault(n, dft)
        stmts: list[ir.Stmt] = []
        for n in names:
            if n not in bound:
                raise self.fail(e, f"helper argument {n} missing")
            sub.locals.add(n)
            stmts.append(ir.Assign(sub.rename(n), self.expr(bound[n]), self.line(e)))
        body = fdef.body
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            raise self.fail(e, f"helper {fdef.name} must end in `return <value>`")
        for s in body[:-1]:
            if isinstance(s, ast.Return) or any(isinstance(x, ast.Return) for x in ast.walk(s)):
                raise Unsupported(self.kernel, sub.line(s), f"early return inside helper {fdef.name}",
                                  self.filename)
        stmts.extend(sub.stmts(body[:-1]))
        ret = body[-1].value
        rets = ret.elts if isinstance(ret, ast.Tuple) else [ret]
        if len(rets) != want:
            raise self.fail(e, f"helper {fdef.name} returns {len(rets)} values, {want} expected")
        values = [sub.expr(r) for r in rets]
        self.pre_stmts.extend(stmts)
        return values


_MISSING = object()


def _is_jit(obj: Any) -> bool:
    # under TRITON_INTERPRET=1 `@triton.jit` makes an InterpretedFunction, which has `fn` but no `src`
    return hasattr(obj, "fn") and hasattr(obj, "src") or type(obj).__name__ in ("JITFunction", "InterpretedFunction")


def kernel_from_function(kernel: Any) -> ir.Kernel:
    """A `@triton.jit` object (or a plain Python function) -> IR."""
    py = getattr(kernel, "fn", kernel)
    src_lines, start = inspect.getsourcelines(py)
    filename = inspect.getsourcefile(py) or "<unknown>"
    return kernel_from_source("".join(src_lines), name=py.__name__, first_line=start, filename=filename,
                              globals_=py.__globals__)


def kernel_from_source(source: str, name: str | None = None, first_line: int = 1, filename: str = "<string>",
                       globals_: dict[str, Any] | None = None) -> ir.Kernel:
    with serial.LOCK:
        return _kernel_from_source(source, name, first_line, filename, globals_)


def _kernel_from_source(source: str, name: str | None, first_line: int, filename: str,
                        globals_: dict[str, Any] | None) -> ir.Kernel:
    tree = ast.parse(textwrap.dedent(source))
    fdefs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if name is not None:
        fdefs = [f for f in fdefs if f.name == name]
    else:
        jitted = [f for f in fdefs if any("jit" in ast.unparse(d) for d in f.decorator_list)]
        fdefs = jitted or fdefs
    if not fdefs:
        raise ValueError(f"no kernel function {name or ''} in source")
    fdef = fdefs[-1]
    tr = _Translator(fdef.name, first_line, filename, dict(globals_ or {}))
    body_stmts = _without_dependency_wait(fdef, tr)
    params = []
    for a in fdef.args.args:
        if a.arg == DEPENDENCY_WAIT_FLAG:
            continue
        ann = ast.unparse(a.annotation) if a.annotation is not None else ""
        params.append(ir.Param(a.arg, "constexpr" in ann, tr.line(a)))
        tr.locals.add(a.arg)
        tr.params.add(a.arg)
    if fdef.args.vararg or fdef.args.kwarg or fdef.args.kwonlyargs:
        raise tr.fail(fdef, "variadic or keyword-only kernel parameters")
    body = tr.stmts(body_stmts)
    return ir.Kernel(fdef.name, tuple(params), body, filename, tr.line(fdef))


# Programmatic dependent launch (vosti_plugin/ops/dependent_launch.py): a kernel may take the constexpr PDL, whose
# one use is its body's first statement (after a docstring), `if PDL: tl.extra.cuda.gdc_wait()`. Launched with PDL
# the kernel may start while the kernel before it in the stream runs, and waits there, before any memory access,
# until that kernel has ended and its writes are visible; so the kernel computes what it computes without the
# statement, which is dropped. PDL anywhere else (it is then an unknown name) and a wait anywhere else (an unknown
# call: it would let the kernel read its predecessor's output early) are outside the subset.
DEPENDENCY_WAIT_FLAG = "PDL"
DEPENDENCY_WAIT_CALLS = ("tl.extra.cuda.gdc_wait", "triton.language.extra.cuda.gdc_wait")


def _without_dependency_wait(fdef: ast.FunctionDef, tr: "_Translator") -> list[ast.stmt]:
    body = list(fdef.body)
    if not any(a.arg == DEPENDENCY_WAIT_FLAG for a in fdef.args.args):
        return body
    first = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str) else 0
    gate = body[first] if len(body) > first else None
    if not (isinstance(gate, ast.If) and isinstance(gate.test, ast.Name) and gate.test.id == DEPENDENCY_WAIT_FLAG
            and not gate.orelse and len(gate.body) == 1 and isinstance(gate.body[0], ast.Expr)
            and isinstance(gate.body[0].value, ast.Call) and not gate.body[0].value.args
            and not gate.body[0].value.keywords
            and ast.unparse(gate.body[0].value.func) in DEPENDENCY_WAIT_CALLS):
        raise tr.fail(gate or fdef, f"a kernel that takes {DEPENDENCY_WAIT_FLAG} must open its body with "
                                    f"`if {DEPENDENCY_WAIT_FLAG}: tl.extra.cuda.gdc_wait()` (the dependent-launch "
                                    f"wait before any memory access)")
    return body[:first] + body[first + 1:]


@dataclass(frozen=True)
class _ConcatenatedLoops:
    """Consecutive `for v in range(b0, b1)`, `for v in range(b1, b2)`, ... read as one loop over [b0, bn) whose
    body takes the i-th loop's body on [b_i, b_i+1), with the obligation b0 <= b1 <= ... <= bn."""

    loop: ast.For
    bounds: tuple[ast.expr, ...]
    lineno: int


def _range_bounds(s: ast.stmt) -> tuple[ast.expr, ast.expr] | None:
    if not (isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse
            and isinstance(s.iter, ast.Call) and len(s.iter.args) == 2):
        return None
    name = _dotted(s.iter.func) or ""
    if name != "range" and not name.endswith(".range"):
        return None
    return s.iter.args[0], s.iter.args[1]


def _pure(e: ast.expr) -> bool:
    """e reads no memory: re-evaluated inside the merged loop, it keeps the value it had ahead of its loop."""
    return all((_dotted(n.func) or "").rsplit(".", 1)[-1] in MATH_FNS for n in ast.walk(e) if isinstance(n, ast.Call))


def _stored_names(nodes) -> set[str]:
    return {n.id for s in nodes for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _concatenated_loops(body: list[ast.stmt]) -> list:
    """body with each run of loops over consecutive ranges (the same loop name, one loop's stop the next one's
    start, written the same, and no bound assigned in a body) merged into one `_ConcatenatedLoops`."""
    out: list = []
    i = 0
    while i < len(body):
        run = [body[i]]
        while i + len(run) < len(body):
            a, b = run[-1], body[i + len(run)]
            ra, rb = _range_bounds(a), _range_bounds(b)
            if ra is None or rb is None or a.target.id != b.target.id or ast.dump(ra[1]) != ast.dump(rb[0]):
                break
            run.append(b)
        if len(run) == 1:
            out.append(body[i])
            i += 1
            continue
        bounds = [_range_bounds(run[0])[0]] + [_range_bounds(s)[1] for s in run]
        bound_names = {n.id for b in bounds for n in ast.walk(b) if isinstance(n, ast.Name)}
        if bound_names & _stored_names(run) or not all(_pure(b) for b in bounds):
            # a body may move a later loop's bound: not one range; proved (or not) loop by loop
            out.extend(run)
            i += len(run)
            continue
        var = run[0].target.id
        branch: list[ast.stmt] = run[-1].body
        for s, stop in zip(reversed(run[:-1]), reversed(bounds[1:-1])):
            test = ast.Compare(left=ast.Name(var, ast.Load()), ops=[ast.Lt()], comparators=[stop])
            branch = [ast.If(test=test, body=s.body, orelse=branch)]
        merged = ast.For(target=run[0].target,
                         iter=ast.Call(func=ast.Name("range", ast.Load()), args=[bounds[0], bounds[-1]], keywords=[]),
                         body=branch, orelse=[], type_comment=None)
        for node in ast.walk(merged):
            if not hasattr(node, "lineno"):
                ast.copy_location(node, run[0])
        out.append(_ConcatenatedLoops(merged, tuple(bounds), run[0].lineno))
        i += len(run)
    return out
