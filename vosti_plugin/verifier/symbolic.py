"""Symbolic execution of one invocation (left or right) of a kernel IR for one symbolic program.

Program ids, integer parameters and shape symbols are Z3 integers named per side (`M@L`), or shared
(`M`) when the goal lists them in `same`; constexprs take the config's values.  The result is the list of
stores (tensor, coordinates, mask, value, guard) and, per loop, its range and the initial and next value
of every loop-carried float variable.  Loop-carried integers and pointers must be induction variables
(`v += delta` with a loop-invariant delta) and are replaced by their closed form.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Optional

import z3

from vosti_plugin.verifier import ir
from vosti_plugin.verifier.contracts import Contract, ScalarSpec, TensorSpec
from vosti_plugin.verifier.frontend import Unsupported
from vosti_plugin.verifier.values import (monomial, FConst, FFromInt, FLoad, FLoopOut, FOp, FParam, FReduce, FSelect, FState, FTerm,
                             FUndef, Lin, PtrElem, Tile, broadcast, broadcast_shape, const_tile, dims_eq, fits32,
                             merge_conds, shapes_eq, wider)

_fresh = itertools.count()
_SAME = object()  # carry(): the width of the widest part


def fresh_int(prefix: str) -> z3.ArithRef:
    return z3.Int(f"{prefix}{next(_fresh)}")


def red_var(line: int, side: str, lanes: tuple) -> z3.ArithRef:
    """The bound variable of a reduction: a function of where it is, so equal terms get equal keys."""
    return z3.Int(f"_r{line}@{side}#" + "_".join(str(z3.simplify(l).sexpr()) for l in lanes))


@dataclass(eq=False)
class LoopInfo:
    id: str
    side: str
    k: z3.ArithRef
    start: z3.ArithRef
    stop: z3.ArithRef
    step: Any  # int, or a Z3 term of symbolic constexprs
    carried: dict[str, tuple[Tile, Tile]]  # name -> (init, next) for float state
    alive: z3.BoolRef
    line: int
    outer: tuple["LoopInfo", ...] = ()
    var: str = ""
    wide: Any = None  # the loop variable is int64 (a bound is)

    def in_range(self, k: Optional[z3.ArithRef] = None) -> z3.BoolRef:
        k = self.k if k is None else k
        c = z3.And(self.start <= k, k < self.stop)
        if not (isinstance(self.step, int) and self.step == 1):
            c = z3.And(c, (k - self.start) % self.step == 0)
        return c


@dataclass(eq=False)
class StoreInfo:
    tensor: str
    side: str
    shape: tuple[int, ...]
    ptr: Tile
    mask: Optional[Tile]
    value: Tile
    guard: z3.BoolRef
    loops: tuple[LoopInfo, ...]
    line: int
    seq: int = 0


@dataclass(eq=False)
class LoadInfo:
    tensor: str
    side: str
    shape: tuple
    ptr: Tile
    mask: Optional[Tile]
    guard: z3.BoolRef
    loops: tuple
    line: int
    seq: int  # position in program order among this side's loads and stores


@dataclass(eq=False)
class SideResult:
    side: str
    stores: list[StoreInfo]
    loops: dict[str, LoopInfo]
    pids: tuple[z3.ArithRef, ...]
    variables: dict[str, z3.ArithRef] = field(default_factory=dict)
    axioms: list = field(default_factory=list)  # facts about counting scans (hold once obligations do)
    obligations: list = field(default_factory=list)  # (name, line, message, z3 goal)
    loads: list = field(default_factory=list)  # LoadInfo, in program order


def _consts(e: z3.ExprRef) -> set:
    from vosti_plugin.verifier.smt import free_consts
    return set(free_consts(e))


def _is_zero(e: z3.ArithRef) -> bool:
    return z3.is_int_value(z3.simplify(e)) and z3.simplify(e).as_long() == 0


class SideEvaluator:
    def __init__(self, kernel: ir.Kernel, contract: Contract, config: dict[str, Any], side: str,
                 same: set[str], symbolic: frozenset = frozenset()):
        self.k = kernel
        self.c = contract
        self.config = config
        self.side = side
        self.same = same
        self.symbolic = symbolic  # integer constexprs verified for every value (a Z3 constant each)
        self.env: dict[str, Tile] = {}
        self.alive: z3.BoolRef = z3.BoolVal(True)
        self.stores: list[StoreInfo] = []
        self.loops: dict[str, LoopInfo] = {}
        self.loop_stack: list[LoopInfo] = []
        self.recording = True
        self.strides: set[str] = set()  # names that occur in some tensor stride (they keep Lin keys)
        for name, spec in contract.params:
            if isinstance(spec, TensorSpec):
                for s in spec.strides:
                    if isinstance(s, str):
                        self.strides |= set(monomial(s))
        self.int_fns: dict[str, z3.FuncDeclRef] = {}
        self.pids: dict[int, z3.ArithRef] = {}
        self.counts: dict[int, tuple] = {}
        self.axioms: list = []
        self.obligations: list = []
        self.loads: list[LoadInfo] = []
        self.seq = itertools.count()

    # -- names ---------------------------------------------------------------------------------------
    def var(self, name: str) -> z3.ArithRef:
        return z3.Int(name if name in self.same else f"{name}@{self.side}")

    def int_fn(self, tensor: str) -> z3.FuncDeclRef:
        if tensor not in self.int_fns:
            rank = len(self.c.tensors[tensor].shape)
            self.int_fns[tensor] = z3.Function(f"{tensor}@{self.side}", *([z3.IntSort()] * rank), z3.IntSort())
        return self.int_fns[tensor]

    def fail(self, line: int, what: str) -> Unsupported:
        return Unsupported(self.k.name, line, what, self.k.filename)

    # -- entry ---------------------------------------------------------------------------------------
    def run(self) -> SideResult:
        for p in self.k.params:
            if p.constexpr and p.name in self.symbolic and isinstance(self.config.get(p.name), bool):
                b = z3.Bool(p.name)
                self.env[p.name] = Tile("bool", (), lambda _l, b=b: b)
                continue
            if p.constexpr and p.name in self.symbolic and p.name in self.strides:
                self.env[p.name] = Tile("int", (), lambda _l, n=p.name: Lin({(n,): z3.IntVal(1)}))
                continue
            if p.constexpr and p.name in self.symbolic:
                v = z3.Int(p.name)
                self.env[p.name] = Tile("int", (), lambda _l, v=v: Lin.const(v))
                continue
            if p.constexpr:
                if p.name not in self.config:
                    raise self.fail(p.line, f"config does not give constexpr {p.name}")
                self.env[p.name] = const_tile(self.config[p.name])
                continue
            spec = self.c.param(p.name)
            if isinstance(spec, TensorSpec):
                rank = len(spec.shape)
                zero = tuple(z3.IntVal(0) for _ in range(rank))
                self.env[p.name] = Tile("ptr", (), lambda _l, n=p.name, z=zero: PtrElem(n, self.side, z),
                                        dtype=p.name)
            elif isinstance(spec, ScalarSpec) and spec.is_float:
                side = "both" if p.name in self.same else self.side
                self.env[p.name] = Tile("float", (), lambda _l, n=p.name, s=side: FParam(n, s), dtype=spec.dtype)
            elif p.name in self.config and isinstance(self.config[p.name], (int, float)):
                self.env[p.name] = const_tile(self.config[p.name])
            elif p.name in self.strides:
                self.env[p.name] = Tile("int", (), lambda _l, n=p.name: Lin({(n,): z3.IntVal(1)}),
                                        wide=z3.Not(fits32(self.stride_var(p.name))))
            else:
                v = self.var(p.name)
                self.env[p.name] = Tile("int", (), lambda _l, v=v: Lin.const(v), wide=z3.Not(fits32(v)))
        self.block(self.k.body)
        return SideResult(self.side, self.stores, self.loops,
                          tuple(self.pids[a] for a in sorted(self.pids)), {}, self.axioms, self.obligations, self.loads)

    def stride_var(self, key: str) -> z3.ArithRef:
        return z3.Int(key) if key in self.symbolic else self.var(key)

    def z(self, t: Tile, lanes: tuple = ()) -> z3.ArithRef:
        """Scalar/int element as a Z3 integer."""
        e = t.at(lanes)
        if isinstance(e, Lin):
            return e.to_z3(self.stride_var)
        if isinstance(e, z3.BoolRef):
            return z3.If(e, z3.IntVal(1), z3.IntVal(0))
        raise TypeError(f"not an integer: {t.kind}")

    def zb(self, t: Tile, lanes: tuple = ()) -> z3.BoolRef:
        e = t.at(lanes)
        if isinstance(e, z3.BoolRef):
            return e
        if isinstance(e, Lin):
            return e.to_z3(self.stride_var) != 0
        raise TypeError(f"not a boolean: {t.kind}")

    def fterm(self, t: Tile, lanes: tuple) -> FTerm:
        e = t.at(lanes)
        if isinstance(e, FTerm):
            return e
        if isinstance(e, Lin):
            return FFromInt(e.to_z3(self.stride_var))
        if isinstance(e, z3.BoolRef):
            return FFromInt(z3.If(e, z3.IntVal(1), z3.IntVal(0)))
        raise TypeError(f"not a float: {t.kind}")

    # -- statements ----------------------------------------------------------------------------------
    def block(self, stmts: tuple[ir.Stmt, ...]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Assign):
            self.env[s.target] = self.expr(s.value)
        elif isinstance(s, ir.Store):
            self.store(s)
        elif isinstance(s, ir.If):
            self.if_(s)
        elif isinstance(s, ir.For):
            self.for_(s)
        elif isinstance(s, ir.Return):
            if self.loop_stack:
                raise self.fail(s.line, "return inside a loop")
            self.alive = z3.BoolVal(False)
        elif isinstance(s, ir.Check):
            cond = self.expr(s.cond)
            if cond.shape or cond.kind in ("float", "fbool"):
                raise self.fail(s.line, f"check {s.name} on a tile or a float")
            if self.recording:
                self.obligations.append((s.name, s.line, s.message, z3.Implies(self.alive, self.zb(cond))))
        else:  # pragma: no cover
            raise self.fail(getattr(s, "line", 0), f"statement {type(s).__name__}")

    def store(self, s: ir.Store) -> None:
        ptr = self.expr(s.ptr)
        if ptr.kind != "ptr":
            raise self.fail(s.line, "tl.store to a non-pointer")
        value = self.expr(s.value)
        mask = self.expr(s.mask) if s.mask is not None else None
        shape = broadcast_shape(ptr.shape, value.shape)
        if mask is not None:
            shape = broadcast_shape(shape, mask.shape)
        if not self.recording:
            return
        self.stores.append(StoreInfo(ptr.dtype, self.side, shape, broadcast(ptr, shape),
                                     broadcast(mask, shape) if mask is not None else None,
                                     broadcast(value, shape), self.alive, tuple(self.loop_stack), s.line,
                                     next(self.seq)))

    def if_(self, s: ir.If) -> None:
        cond = self.expr(s.cond)
        if cond.shape:
            raise self.fail(s.line, "`if` on a tile (use tl.where)")
        if cond.concrete is not None:
            self.block(s.then if cond.concrete else s.orelse)
            return
        if cond.kind in ("float", "fbool"):
            raise self.fail(s.line, "`if` on a float value")
        c = z3.simplify(self.zb(cond))
        if z3.is_true(c) or z3.is_false(c):
            self.block(s.then if z3.is_true(c) else s.orelse)
            return
        before = dict(self.env)
        alive0 = self.alive
        self.alive = z3.And(alive0, c)
        self.block(s.then)
        env_t, alive_t = self.env, self.alive
        self.env = dict(before)
        self.alive = z3.And(alive0, z3.Not(c))
        self.block(s.orelse)
        env_e, alive_e = self.env, self.alive
        self.alive = z3.simplify(z3.Or(alive_t, alive_e))
        merged = {}
        for name in set(env_t) | set(env_e):
            a, b = env_t.get(name), env_e.get(name)
            if a is None or b is None:
                continue  # defined in one branch only: unusable afterwards
            merged[name] = a if a is b else self.select_tile(c, a, b, s.line)
        self.env = merged

    def select_tile(self, c: z3.BoolRef, a: Tile, b: Tile, line: int) -> Tile:
        cond = Tile("bool", (), lambda _l: c)
        return self.where(cond, a, b, line)

    # -- loops ---------------------------------------------------------------------------------------
    def assigned(self, stmts: tuple[ir.Stmt, ...]) -> set[str]:
        out: set[str] = set()
        for s in stmts:
            if isinstance(s, ir.Assign):
                out.add(s.target)
            elif isinstance(s, ir.For):
                out |= self.assigned(s.body)
            elif isinstance(s, ir.If):
                out |= self.assigned(s.then) | self.assigned(s.orelse)
        return out

    def for_(self, s: ir.For) -> None:
        start_t, stop_t, step_t = self.expr(s.start), self.expr(s.stop), self.expr(s.step)
        if step_t.concrete is not None:
            if not isinstance(step_t.concrete, int) or step_t.concrete <= 0:
                raise self.fail(s.line, "loop step must be a positive constant")
            step = step_t.concrete
        else:
            step = z3.simplify(self.z(step_t))
            if not all(str(n) in self.symbolic for n in _consts(step)):
                raise self.fail(s.line, "loop step must be a constexpr")
        loop_id = "/".join([l.id for l in self.loop_stack[-1:]] + [f"loop{s.line}"])
        k = z3.Int(f"k{s.line}@{self.side}")
        start, stop = self.z(start_t), self.z(stop_t)
        loop_wide = wider(start_t, stop_t)
        carried = [n for n in sorted(self.assigned(s.body)) if n in self.env and n != s.var]
        floats = [n for n in carried if self.env[n].kind == "float"]
        others = [n for n in carried if self.env[n].kind in ("int", "ptr")]
        bad = [n for n in carried if n not in floats and n not in others]
        if bad:
            raise self.fail(s.line, f"loop-carried {self.env[bad[0]].kind} variable {bad[0]}")
        it = k - start if isinstance(step, int) and step == 1 else (k - start) / step
        inits = {n: self.env[n] for n in carried}

        state_shapes = {n: inits[n].shape for n in floats}
        deltas: dict[str, Any] = {}
        counting: dict[str, tuple] = {}
        for attempt in range(3):
            info = LoopInfo(loop_id, self.side, k, start, stop, step, {}, self.alive, s.line,
                            tuple(self.loop_stack), s.var)
            info.wide = loop_wide
            overrides: dict[str, Tile] = {}
            for n in floats:
                overrides[n] = Tile("float", state_shapes[n],
                                    lambda l, n=n: FState(loop_id, n, self.side, tuple(l)), dtype=inits[n].dtype)
            final = attempt > 0 or not others
            for n in counting:
                overrides[n] = inits[n]
            for n in others:
                if attempt == 0:
                    overrides[n] = inits[n]
                else:
                    overrides[n] = self.affine(inits[n], deltas[n], it)
            after = self.run_body(s, info, k, overrides, record=final)
            reshaped = False
            for n in floats:
                nxt = after[n]
                if nxt.kind != "float":
                    raise self.fail(s.line, f"loop-carried {n} changes kind inside the loop")
                if not shapes_eq(nxt.shape, state_shapes[n]):
                    state_shapes[n] = broadcast_shape(state_shapes[n], nxt.shape)
                    reshaped = True
            if reshaped:
                continue
            if attempt == 0 and others:
                for n in others:
                    cnt = self.counting(inits[n], after[n])
                    if cnt is not None:
                        counting[n] = cnt
                    else:
                        deltas[n] = self.delta(inits[n], after[n], s.line, n, k)
                others = [n for n in others if n not in counting]
                continue
            for n in others:
                self.check_induction(inits[n], deltas[n], it, after[n], s.line, n)
            for n in floats:
                init = broadcast(inits[n], state_shapes[n])
                info.carried[n] = (init, after[n])
            break
        else:
            raise self.fail(s.line, "loop-carried shapes do not settle")
        self.loops[loop_id] = info
        n_iter = z3.If(stop > start, (stop - start + step - 1) / step, 0)
        for n in floats:
            self.env[n] = Tile("float", state_shapes[n],
                               lambda l, n=n: FLoopOut(loop_id, n, self.side, tuple(l)), dtype=inits[n].dtype)
        for n in others:
            self.env[n] = self.affine(inits[n], deltas[n], n_iter)
        for n, cnt in counting.items():
            self.env[n] = self.count_result(inits[n], cnt, k, start, step, n_iter, s.line, n)

    def counting(self, init: Tile, nxt: Tile) -> Optional[tuple]:
        """`v += tl.sum(pred.to(int32))` in a loop: the registered count, else None."""
        if init.kind != "int" or init.shape or nxt.shape:
            return None
        d = z3.simplify(self.z(nxt) - self.z(init))
        hit = self.counts.get(d.get_id())
        if hit is not None and z3.eq(hit[0], d):
            return hit
        return None

    def count_result(self, init: Tile, cnt: tuple, k, start, step: int, n_iter, line: int, name: str) -> Tile:
        """The number of indices i in the scanned range with pred(i); sound when pred holds on a prefix of
        the range (proved as obligation `count-scan`)."""
        c, j, pred, extent, _ = cnt
        if not dims_eq(extent, step):
            raise self.fail(line, f"counting loop {name}: the tile width must equal the loop step")
        i = z3.Int(f"_i{line}@{self.side}")
        p_i = z3.simplify(z3.substitute(pred, (j, i - k)))
        if str(k) in {str(x) for x in _consts(p_i)}:
            raise self.fail(line, f"counting loop {name}: the predicate must depend on chunk + lane only")
        total = z3.Int(f"_count{line}@{self.side}")
        hi = start + n_iter * step
        rng = lambda x: z3.And(start <= x, x < hi)  # noqa: E731
        pi = lambda x: z3.substitute(p_i, (i, x))  # noqa: E731
        i1, i2 = z3.Int(f"_i1_{line}@{self.side}"), z3.Int(f"_i2_{line}@{self.side}")
        self.obligations.append(("count-scan", line, f"the predicate counted into {name} holds on a prefix "
                                 "(needed to read the scan's result)",
                                 z3.Implies(z3.And(rng(i1), rng(i2), i1 < i2, pi(i2)), pi(i1))))
        self.axioms += [0 <= total, total <= n_iter * step,
                        z3.ForAll([i], z3.Implies(rng(i), pi(i) == (i < start + total))),
                        z3.Implies(total >= 1, pi(start + total - 1)),
                        z3.Implies(total < n_iter * step, z3.Not(pi(start + total)))]
        base = self.z(init)
        return Tile("int", (), lambda _l: Lin.const(base + total))

    def run_body(self, s: ir.For, info: LoopInfo, k, overrides: dict[str, Tile], record: bool) -> dict[str, Tile]:
        saved_env, saved_rec, saved_alive = dict(self.env), self.recording, self.alive
        self.env.update(overrides)
        self.env[s.var] = Tile("int", (), lambda _l: Lin.const(k), wide=info.wide)
        self.recording = record and saved_rec
        self.loop_stack.append(info)
        try:
            self.block(s.body)  # a `return` inside the body raises Unsupported
            after = dict(self.env)
        finally:
            self.loop_stack.pop()
            self.recording = saved_rec
            self.env = saved_env
            self.alive = saved_alive
        return after

    def delta(self, init: Tile, nxt: Tile, line: int, name: str, k) -> Any:
        if init.kind != nxt.kind:
            raise self.fail(line, f"loop-carried {name} changes kind")
        shape = broadcast_shape(init.shape, nxt.shape)
        init, nxt = broadcast(init, shape), broadcast(nxt, shape)
        if init.kind == "ptr":
            if init.dtype != nxt.dtype:
                raise self.fail(line, f"loop-carried pointer {name} moves to another tensor")
            return ("ptr", shape, lambda l: tuple(z3.simplify(b - a) for a, b in
                                                  zip(init.at(l).coords, nxt.at(l).coords)))
        return ("int", shape, lambda l: nxt.at(l) - init.at(l))

    def affine(self, init: Tile, delta: Any, n) -> Tile:
        kind, shape, dfn = delta
        init = broadcast(init, shape)
        if kind == "ptr":
            def fn(l):
                p = init.at(l)
                return PtrElem(p.tensor, p.side, tuple(z3.simplify(c + n * d) for c, d in zip(p.coords, dfn(l))))
            return Tile("ptr", shape, fn, dtype=init.dtype)
        return Tile("int", shape, lambda l: init.at(l) + dfn(l).scale(n))

    def check_induction(self, init: Tile, delta: Any, it, nxt: Tile, line: int, name: str) -> None:
        kind, shape, dfn = delta
        lanes = tuple(z3.Int(f"_lane{a}") for a in range(len(shape)))
        expected = self.affine(init, delta, it + 1)
        nxt = broadcast(nxt, shape)
        if kind == "ptr":
            a, b = expected.at(lanes), nxt.at(lanes)
            goals = [x == y for x, y in zip(a.coords, b.coords)] + [z3.BoolVal(a.tensor == b.tensor)]
        else:
            goals = [self.z(expected, lanes) == self.z(nxt, lanes)]
        from vosti_plugin.verifier.smt import new_solver
        s = new_solver(3000)
        s.add(z3.Not(z3.And(goals)))
        if s.check() != z3.unsat:
            raise self.fail(line, f"loop-carried integer {name} is not an induction variable (v += constant)")

    # -- expressions ---------------------------------------------------------------------------------
    def expr(self, e: ir.Expr) -> Tile:
        m = getattr(self, "e_" + type(e).__name__)
        return m(e)

    def e_Const(self, e: ir.Const) -> Tile:
        if e.value is None:
            raise self.fail(e.line, "None value")
        return const_tile(e.value)

    def e_Name(self, e: ir.Name) -> Tile:
        if e.id not in self.env:
            raise self.fail(e.line, f"name {e.id!r} is not defined here (globals other than int/float "
                                    f"constants, and loop-local variables used after the loop, are unsupported)")
        return self.env[e.id]

    def e_ProgramId(self, e: ir.ProgramId) -> Tile:
        if e.axis not in self.pids:
            self.pids[e.axis] = z3.Int(f"pid{e.axis}@{self.side}")
        v = self.pids[e.axis]
        return Tile("int", (), lambda _l: Lin.const(v))

    def e_Arange(self, e: ir.Arange) -> Tile:
        a, b = self.expr(e.start), self.expr(e.end)
        if isinstance(a.concrete, int) and isinstance(b.concrete, int):
            lo = a.concrete
            return Tile("int", (b.concrete - lo,), lambda l: Lin.const(l[0] + lo if lo else l[0]))
        za, zb = z3.simplify(self.z(a)), z3.simplify(self.z(b))
        if not all(str(n) in self.symbolic for n in _consts(za) | _consts(zb)):
            raise self.fail(e.line, "tl.arange bounds must be constexpr")
        size = z3.simplify(zb - za)
        return Tile("int", (size,), lambda l: Lin.const(z3.simplify(l[0] + za)))

    def e_Full(self, e: ir.Full) -> Tile:
        dims = []
        for d in e.shape:
            t = self.expr(d)
            if isinstance(t.concrete, int):
                dims.append(t.concrete)
                continue
            zd = z3.simplify(self.z(t)) if t.kind == "int" else None
            if zd is None or not all(str(n) in self.symbolic for n in _consts(zd)):
                raise self.fail(e.line, "tl.full/zeros shape must be constexpr")
            dims.append(zd)
        v = self.expr(e.value)
        if e.dtype.startswith("float") or e.dtype == "bfloat16":
            if v.concrete is not None:
                c = float(v.concrete)
                return Tile("float", tuple(dims), lambda _l: FConst(c), dtype=e.dtype)
            vt = v
            return Tile("float", tuple(dims), lambda _l: self.fterm(vt, ()), dtype=e.dtype)
        if e.dtype == "int1":
            return broadcast(self.carry(Tile("bool", (), lambda _l: self.zb(v)), v), tuple(dims))
        return broadcast(self.carry(Tile("int", (), lambda _l: Lin.const(self.z(v))), v,
                                    wide=z3.BoolVal(True) if e.dtype == "int64" else None), tuple(dims))

    def e_DtypeOf(self, e: ir.DtypeOf) -> Tile:
        spec = self.c.param(e.param)
        if not isinstance(spec, TensorSpec):
            raise self.fail(e.line, f"{e.param}.dtype of a non-tensor")
        return const_tile(spec.dtype)

    def e_TileDtype(self, e: ir.TileDtype) -> Tile:
        x = self.expr(e.x)
        if x.kind == "float":
            return const_tile(x.dtype or "float32")
        if x.kind == "ptr":
            return const_tile(self.c.tensors[x.dtype].dtype)
        return const_tile("int32")

    def e_IfExp(self, e: ir.IfExp) -> Tile:
        c = self.expr(e.cond)
        if c.concrete is not None:
            return self.expr(e.a if c.concrete else e.b)
        return self.where(c, self.expr(e.a), self.expr(e.b), e.line)

    def e_Subscript(self, e: ir.Subscript) -> Tile:
        x = self.expr(e.x)
        keep = [i for i, p in enumerate(e.pattern) if p == ":"]
        if len(keep) != len(x.shape):
            raise self.fail(e.line, "broadcast pattern rank differs from the tile's")
        shape, it = [], iter(x.shape)
        for p in e.pattern:
            shape.append(next(it) if p == ":" else 1)
        out = Tile(x.kind, tuple(shape), lambda l: x.at(tuple(l[i] for i in keep)), dtype=x.dtype, wide=x.wide)
        if x.side is not None:
            out.side = lambda l: x.conds(tuple(l[i] for i in keep))
        return out

    def constexpr_dim(self, d: ir.Expr, line: int, what: str):
        """A tile dimension: an int, or a Z3 term of the symbolic constexprs (as tl.arange and tl.full take them)."""
        t = self.expr(d)
        if isinstance(t.concrete, int):
            return t.concrete
        zd = z3.simplify(self.z(t)) if t.kind == "int" else None
        if zd is None or not all(str(n) in self.symbolic for n in _consts(zd)):
            raise self.fail(line, f"{what} must be an integer constexpr")
        return zd

    def e_Reshape(self, e: ir.Reshape) -> Tile:
        """Axes of size 1 added or dropped: element l of the result is the tile's element at l's other axes."""
        x = self.expr(e.x)
        dims = [self.constexpr_dim(d, e.line, "a reshape's dimension") for d in e.dims]

        def unit(n) -> bool:
            return isinstance(n, int) and n == 1

        def same(a, b) -> bool:
            if isinstance(a, int) or isinstance(b, int):
                return isinstance(a, int) and isinstance(b, int) and a == b
            return z3.eq(z3.simplify(a), z3.simplify(b))

        src = [i for i, n in enumerate(x.shape) if not unit(n)]
        dst = [i for i, n in enumerate(dims) if not unit(n)]
        if len(src) != len(dst) or not all(same(x.shape[i], dims[j]) for i, j in zip(src, dst)):
            raise self.fail(e.line, f"reshape of a {tuple(x.shape)} tile to {tuple(dims)}: only axes of size 1 may be "
                                    f"added or dropped (other reshapes move elements)")

        def at(l):
            idx = [0] * len(x.shape)
            for i, j in zip(src, dst):
                idx[i] = l[j]
            return tuple(idx)

        out = Tile(x.kind, tuple(dims), lambda l: x.at(at(l)), dtype=x.dtype, wide=x.wide)
        if x.side is not None:
            out.side = lambda l: x.conds(at(l))
        return out

    def e_Trans(self, e: ir.Trans) -> Tile:
        x = self.expr(e.x)
        if len(x.shape) != 2:
            raise self.fail(e.line, "tl.trans of a non-2D tile")
        out = Tile(x.kind, (x.shape[1], x.shape[0]), lambda l: x.at((l[1], l[0])), dtype=x.dtype, wide=x.wide)
        if x.side is not None:
            out.side = lambda l: x.conds((l[1], l[0]))
        return out

    def e_Cast(self, e: ir.Cast) -> Tile:
        x, d = self.expr(e.x), self.expr(e.dtype)
        if d.kind != "dtype":
            raise self.fail(e.line, ".to() with a non-dtype argument")
        dt = d.concrete
        if x.kind == "float":
            if dt.startswith("float") or dt == "bfloat16":
                if x.dtype == dt:
                    return x
                op = ("bitcast:" + dt) if e.rounding == "bitcast" else \
                    ("cast:" + dt + ("" if e.rounding == "rtne" else ":" + e.rounding))
                return Tile("float", x.shape, lambda l: FOp(op, (x.at(l),), e.line), dtype=dt)
            raise self.fail(e.line, "float -> integer conversion")
        if e.rounding == "bitcast":
            raise self.fail(e.line, "bitcast between integers and floats")
        if x.kind in ("int", "bool"):
            if dt.startswith("float") or dt == "bfloat16":
                return Tile("float", x.shape, lambda l: FFromInt(self.z(x, l), e.line), dtype=dt)
            if dt == "int1":
                return self.carry(Tile("bool", x.shape, lambda l: self.zb(x, l)), x)
            out = Tile("int", x.shape, lambda l: Lin.const(self.z(x, l)) if x.kind == "bool" else x.at(l),
                       concrete=x.concrete)
            if dt in ("int64", "uint64"):
                return self.carry(out, x, wide=z3.BoolVal(True))
            self.carry(out, x, wide=None)
            if x.kind == "int" and x.wide is not None:  # a narrowing cast must not drop bits
                def narrow(l, w=x.wide):
                    return merge_conds(x.conds(l), (("int-overflow", e.line,
                                                     z3.simplify(z3.Or(z3.Not(w), fits32(self.z(x, l))))),))
                out.side = narrow
            return out
        raise self.fail(e.line, f"cast of a {x.kind}")

    def e_UnaryOp(self, e: ir.UnaryOp) -> Tile:
        x = self.expr(e.operand)
        if x.concrete is not None and x.kind != "dtype":
            v = x.concrete
            return const_tile(-v if e.op == "neg" else (not v) if e.op == "not" else ~v)
        if e.op == "neg":
            if x.kind == "float":
                return Tile("float", x.shape, lambda l: FOp("neg", (x.at(l),), e.line), dtype=x.dtype)
            if x.kind == "int":
                return Tile("int", x.shape, lambda l: x.at(l).neg())
        if e.op in ("not", "invert") and x.kind == "bool":
            return Tile("bool", x.shape, lambda l: z3.Not(x.at(l)))
        raise self.fail(e.line, f"unary {e.op} on {x.kind}")

    def e_BinOp(self, e: ir.BinOp) -> Tile:
        return self.binop(e.op, self.expr(e.left), self.expr(e.right), e.line)

    def binop(self, op: str, a: Tile, b: Tile, line: int) -> Tile:
        if a.concrete is not None and b.concrete is not None and a.kind != "dtype" and b.kind != "dtype":
            x, y = a.concrete, b.concrete
            py = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "div": lambda: x / y,
                  "floordiv": lambda: x // y, "mod": lambda: x % y, "and": lambda: x & y if not
                  isinstance(x, bool) else (x and y), "or": lambda: x | y if not isinstance(x, bool) else (x or y),
                  "xor": lambda: x ^ y, "lshift": lambda: x << y, "rshift": lambda: x >> y}
            return const_tile(py[op]())
        shape = broadcast_shape(a.shape, b.shape)
        a, b = broadcast(a, shape), broadcast(b, shape)
        kinds = {a.kind, b.kind}
        if "ptr" in kinds:
            if op not in ("add", "sub") or kinds not in ({"ptr", "int"},) or (op == "sub" and b.kind == "ptr"):
                raise self.fail(line, f"pointer arithmetic {op} with {a.kind}/{b.kind}")
            p, o = (a, b) if a.kind == "ptr" else (b, a)
            sign = -1 if op == "sub" else 1
            out = Tile("ptr", shape, lambda l: self.offset(p.at(l), o.at(l), sign, line), dtype=p.dtype)
            return self.carry(out, p, o)
        if "fbool" in kinds:
            if op in ("and", "or") and kinds <= {"fbool"}:
                return Tile("fbool", shape, lambda l: FOp(op, (a.at(l), b.at(l)), line))
            raise self.fail(line, f"{op} mixing float predicates with integer masks")
        if "float" in kinds:
            if op in ("and", "or", "xor", "lshift", "rshift", "mod", "floordiv"):
                raise self.fail(line, f"float {op}")
            dt = a.dtype if a.kind == "float" else b.dtype
            return Tile("float", shape, lambda l: FOp(op, (self.fterm(a, l), self.fterm(b, l)), line), dtype=dt)
        if op in ("and", "or", "xor") and kinds == {"bool"}:
            f = {"and": z3.And, "or": z3.Or, "xor": z3.Xor}[op]
            return self.carry(Tile("bool", shape, lambda l: f(a.at(l), b.at(l))), a, b)
        if op in ("and", "or", "xor", "lshift", "rshift"):
            raise self.fail(line, f"bitwise {op} on integers")
        if op == "add":
            return self.checked(Tile("int", shape, lambda l: self.lin(a, l) + self.lin(b, l)), a, b, line)
        if op == "sub":
            return self.checked(Tile("int", shape, lambda l: self.lin(a, l) - self.lin(b, l)), a, b, line)
        if op == "mul":
            def mul(l):
                x, y = self.lin(a, l), self.lin(b, l)
                if not x.stride_keys:
                    return y.scale(x.coeff(None))
                if not y.stride_keys:
                    return x.scale(y.coeff(None))
                return x.times(y)
            return self.checked(Tile("int", shape, mul), a, b, line)
        if op in ("floordiv", "mod"):
            # Z3's div/mod are Euclidean, Triton's truncate toward zero: they agree when the divisor is
            # positive and the dividend non-negative or a multiple of it, which becomes a side condition
            f = (lambda x, y: x / y) if op == "floordiv" else (lambda x, y: x % y)
            out = Tile("int", shape, lambda l: Lin.const(z3.simplify(f(self.z(a, l), self.z(b, l)))), wide=wider(a, b))

            def div_side(l):
                x, y = self.z(a, l), self.z(b, l)
                c = z3.simplify(z3.And(y > 0, z3.Or(x >= 0, x % y == 0)))
                return merge_conds(a.conds(l), b.conds(l), (("int-division", line, c),))
            out.side = div_side
            return out
        if op == "div":
            return Tile("float", shape, lambda l: FOp("div", (self.fterm(a, l), self.fterm(b, l)), line),
                        dtype="float32")
        raise self.fail(line, f"operator {op}")

    @staticmethod
    def carry(out: Tile, *parts: Tile, wide: Any = _SAME) -> Tile:
        """out's side conditions are those of parts at the same lanes (all broadcast to out's shape)."""
        ps = [p for p in parts if p is not None and p.side is not None]
        if ps:
            out.side = lambda l: merge_conds(*[p.conds(l) for p in ps])
        if wide is _SAME:
            out.wide = wider(*parts) if out.kind == "int" else None
        else:
            out.wide = wide
        return out

    def checked(self, out: Tile, a: Tile, b: Tile, line: int) -> Tile:
        """An int add/sub/mul: int64 when an operand is, else int32, where the result must not wrap."""
        w = wider(a, b)
        out.wide = w

        def side(l):
            r = self.z(out, l)
            c = fits32(r) if w is None else z3.Or(w, fits32(r))
            return merge_conds(a.conds(l), b.conds(l), (("int-overflow", line, z3.simplify(c)),))
        out.side = side
        return out

    def lin(self, t: Tile, l: tuple) -> Lin:
        e = t.at(l)
        if isinstance(e, Lin):
            return e
        return Lin.const(self.z(t, l))

    def offset(self, p: PtrElem, o: Any, sign: int, line: int) -> PtrElem:
        if not isinstance(o, Lin):
            o = Lin.const(z3.If(o, 1, 0))
        spec = self.c.tensors[p.tensor]
        keys = [monomial(s) if isinstance(s, str) else None for s in spec.strides]
        coords = list(p.coords)
        for key, coef in o.terms.items():
            if key is None:
                if _is_zero(coef):
                    continue
                if 1 not in spec.strides:
                    raise self.fail(line, f"offset into {p.tensor} without a stride, but no dimension of "
                                          f"{p.tensor} has stride 1 in the contract")
                d = spec.strides.index(1)
            else:
                if key not in keys:
                    raise self.fail(line, f"offset into {p.tensor} uses {'*'.join(key)}, which is not one of "
                                          f"its strides")
                d = keys.index(key)
            coords[d] = z3.simplify(coords[d] + sign * coef)
        return PtrElem(p.tensor, p.side, tuple(coords))

    def e_Compare(self, e: ir.Compare) -> Tile:
        a, b = self.expr(e.left), self.expr(e.right)
        if a.concrete is not None and b.concrete is not None:
            x, y = a.concrete, b.concrete
            return const_tile({"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y,
                               "ne": x != y}[e.op])
        shape = broadcast_shape(a.shape, b.shape)
        a, b = broadcast(a, shape), broadcast(b, shape)
        if "float" in (a.kind, b.kind):
            return Tile("fbool", shape, lambda l: FOp(e.op, (self.fterm(a, l), self.fterm(b, l)), e.line))
        if "ptr" in (a.kind, b.kind):
            raise self.fail(e.line, "pointer comparison")
        ops = {"lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y,
               "ge": lambda x, y: x >= y, "eq": lambda x, y: x == y, "ne": lambda x, y: x != y}
        f = ops[e.op]
        return self.carry(Tile("bool", shape, lambda l: f(self.z(a, l), self.z(b, l))), a, b)

    def where(self, c: Tile, a: Tile, b: Tile, line: int) -> Tile:
        shape = broadcast_shape(broadcast_shape(c.shape, a.shape), b.shape)
        c, a, b = broadcast(c, shape), broadcast(a, shape), broadcast(b, shape)
        if c.kind == "fbool":
            if "float" not in (a.kind, b.kind):
                raise self.fail(line, "tl.where on a float predicate selecting integers")
            return Tile("float", shape, lambda l: FSelect(c.at(l), self.fterm(a, l), self.fterm(b, l), line),
                        dtype=a.dtype or b.dtype)
        if c.kind not in ("bool", "int"):
            raise self.fail(line, f"tl.where condition of kind {c.kind}")
        if "float" in (a.kind, b.kind):
            return Tile("float", shape, lambda l: FSelect(self.zb(c, l), self.fterm(a, l), self.fterm(b, l), line),
                        dtype=a.dtype if a.kind == "float" else b.dtype)
        out = self.where_values(c, a, b, shape, line)
        if c.side is not None or a.side is not None or b.side is not None:
            def side(l):
                cc = self.zb(c, l)
                return merge_conds(c.conds(l), tuple((n, ln, z3.Implies(cc, x)) for n, ln, x in a.conds(l)),
                                   tuple((n, ln, z3.Implies(z3.Not(cc), x)) for n, ln, x in b.conds(l)))
            out.side = side
        if out.kind == "int":
            out.wide = wider(a, b)
        return out

    def where_values(self, c: Tile, a: Tile, b: Tile, shape: tuple, line: int) -> Tile:
        if a.kind == "ptr" and b.kind == "ptr":
            def pfn(l):
                pa, pb = a.at(l), b.at(l)
                if pa.tensor != pb.tensor:
                    raise self.fail(line, "tl.where selecting pointers into different tensors")
                cc = self.zb(c, l)
                return PtrElem(pa.tensor, pa.side, tuple(z3.If(cc, x, y) for x, y in zip(pa.coords, pb.coords)))
            return Tile("ptr", shape, pfn, dtype=a.dtype)
        if a.kind == "bool" and b.kind == "bool":
            return Tile("bool", shape, lambda l: z3.If(self.zb(c, l), a.at(l), b.at(l)))
        if a.kind in ("int", "bool") and b.kind in ("int", "bool"):
            return Tile("int", shape, lambda l: Lin.const(z3.If(self.zb(c, l), self.z(a, l), self.z(b, l))))
        raise self.fail(line, f"tl.where over {a.kind}/{b.kind}")

    def e_Where(self, e: ir.Where) -> Tile:
        c = self.expr(e.cond)
        if c.concrete is not None:
            return self.expr(e.a if c.concrete else e.b)
        return self.where(c, self.expr(e.a), self.expr(e.b), e.line)

    def e_Math(self, e: ir.Math) -> Tile:
        args = [self.expr(a) for a in e.args]
        fn = e.fn
        if fn == "cdiv":
            a, b = args
            if a.concrete is not None and b.concrete is not None:
                return const_tile(-(-a.concrete // b.concrete))
            return self.carry(Tile("int", broadcast_shape(a.shape, b.shape),
                              lambda l: Lin.const(z3.simplify((self.z(broadcast(a, ()), ()) + self.z(b) - 1) / self.z(b)))
                              if not a.shape and not b.shape else self._nd(e)), a, b)
        if fn in ("min", "max", "minimum", "maximum") and len(args) == 2:
            a, b = args
            if a.concrete is not None and b.concrete is not None:
                return const_tile(min(a.concrete, b.concrete) if fn in ("min", "minimum")
                                  else max(a.concrete, b.concrete))
            shape = broadcast_shape(a.shape, b.shape)
            a, b = broadcast(a, shape), broadcast(b, shape)
            lt = fn in ("min", "minimum")
            if "float" in (a.kind, b.kind):
                name = "minimum" if lt else "maximum"
                return Tile("float", shape, lambda l: FOp(name, (self.fterm(a, l), self.fterm(b, l)), e.line),
                            dtype=a.dtype or b.dtype)
            def ifn(l):
                x, y = self.z(a, l), self.z(b, l)
                return Lin.const(z3.If(x <= y, x, y) if lt else z3.If(x >= y, x, y))
            return self.carry(Tile("int", shape, ifn), a, b)
        if fn == "abs" and args[0].kind == "int":
            a = args[0]
            return self.carry(Tile("int", a.shape, lambda l: Lin.const(z3.If(self.z(a, l) < 0, -self.z(a, l),
                                                                               self.z(a, l)))), a)
        shape = ()
        for a in args:
            shape = broadcast_shape(shape, a.shape)
        args = [broadcast(a, shape) for a in args]
        if any(a.kind not in ("float", "int", "bool") for a in args):
            raise self.fail(e.line, f"tl.{fn} on {[a.kind for a in args]}")
        dt = next((a.dtype for a in args if a.kind == "float"), "float32")
        return Tile("float", shape, lambda l: FOp(fn, tuple(self.fterm(a, l) for a in args), e.line), dtype=dt)

    def _nd(self, e):
        raise self.fail(e.line, "cdiv of tiles")

    def e_Reduce(self, e: ir.Reduce) -> Tile:
        x = self.expr(e.x)
        if not x.shape:
            raise self.fail(e.line, f"tl.{e.op} of a scalar")
        ax = e.axis if e.axis >= 0 else len(x.shape) + e.axis
        extent = x.shape[ax]
        out_shape = x.shape[:ax] + x.shape[ax + 1:]
        if x.kind == "float":
            def ffn(l):
                j = red_var(e.line, self.side, tuple(l))
                return FReduce(e.op, j, extent, x.at(tuple(l[:ax]) + (j,) + tuple(l[ax:])), e.line)
            return Tile("float", out_shape, ffn, dtype=x.dtype)
        if x.kind in ("bool", "int") and e.op == "sum" and len(x.shape) == 1:
            j = red_var(e.line, self.side, ())
            inner = x.at((j,))
            if isinstance(inner, Lin):
                zi = z3.simplify(inner.to_z3(self.stride_var))
                if z3.is_app_of(zi, z3.Z3_OP_ITE) and z3.eq(zi.arg(1), z3.IntVal(1)) and z3.eq(zi.arg(2), z3.IntVal(0)):
                    inner = zi.arg(0)
                else:
                    raise self.fail(e.line, "tl.sum of an integer tile that is not a 0/1 mask")
            c = fresh_int(f"_cnt{e.line}@{self.side}#")
            self.counts[c.get_id()] = (c, j, inner, x.shape[0], e.line)
            return Tile("int", (), lambda _l: Lin.const(c))
        if x.kind in ("bool", "int") and e.op in ("max", "min"):
            def bfn(l):
                j = red_var(e.line, self.side, tuple(l))
                lanes = tuple(l[:ax]) + (j,) + tuple(l[ax:])
                inner = x.at(lanes)
                if isinstance(inner, Lin):
                    zi = inner.to_z3(self.stride_var)
                    if z3.is_app_of(zi, z3.Z3_OP_ITE) and z3.eq(zi.arg(1), z3.IntVal(1)) \
                            and z3.eq(zi.arg(2), z3.IntVal(0)):
                        inner = zi.arg(0)
                    else:
                        raise self.fail(e.line, f"tl.{e.op} of an integer tile that is not a 0/1 mask")
                rng = z3.And(0 <= j, j < extent)
                q = z3.Exists([j], z3.And(rng, inner)) if e.op == "max" else z3.ForAll([j], z3.Implies(rng, inner))
                return Lin.const(z3.If(q, 1, 0)) if x.kind == "int" else q
            return Tile(x.kind, out_shape, bfn)
        raise self.fail(e.line, f"tl.{e.op} over a {x.kind} tile")

    def e_Dot(self, e: ir.Dot) -> Tile:
        a, b = self.expr(e.a), self.expr(e.b)
        if len(a.shape) != 2 or len(b.shape) != 2 or not dims_eq(a.shape[1], b.shape[0]):
            raise self.fail(e.line, f"tl.dot shapes {a.shape} x {b.shape}")
        kdim = a.shape[1]
        shape = (a.shape[0], b.shape[1])
        acc = broadcast(self.expr(e.acc), shape) if e.acc is not None else None
        op = "dot" + self.dot_options(e)

        def fn(l):
            j = red_var(e.line, self.side, tuple(l))
            red = FReduce(op, j, kdim, FOp("mul", (self.fterm(a, (l[0], j)), self.fterm(b, (j, l[1]))), e.line),
                          e.line)
            if acc is not None:
                return FOp(op + "_acc", (self.fterm(acc, l), red), e.line)
            return red
        return Tile("float", shape, fn, dtype="float32")

    def dot_options(self, e: ir.Dot) -> str:
        """The precision options are part of a dot's identity (an ieee and a tf32 dot of equal tiles differ);
        they must be constexpr, and a dot without input_precision is its own operation (the default is set
        by the platform and TRITON_F32_DEFAULT)."""
        opts = {}
        for k, x in e.options:
            t = self.expr(x)
            if t.concrete is None:
                raise self.fail(e.line, f"tl.dot {k} must be a constexpr")
            opts[k] = t.concrete
        if "allow_tf32" in opts:
            opts.setdefault("input_precision", "tf32" if opts.pop("allow_tf32") else "ieee")
        opts.setdefault("input_precision", "default")
        return "[" + ",".join(f"{k}={v}" for k, v in sorted(opts.items())) + "]"

    def e_DescLoad(self, e: ir.DescLoad) -> Tile:
        """A TMA block load: element (i, j, ...) is desc[o0 + i, o1 + j, ...], and 0 outside the descriptor's
        shape (the hardware's zero fill). Evaluated as the masked pointer load it equals, so every obligation
        that sees loads sees this one."""
        spec = self.c.param(e.desc)
        base = self.env.get(e.desc)
        if not isinstance(spec, TensorSpec) or not spec.is_descriptor or base is None or base.dtype != e.desc:
            raise self.fail(e.line, f"{e.desc}.load: {e.desc} is not a tensor-descriptor parameter of the contract")
        if len(e.offsets) != len(spec.shape):
            raise self.fail(e.line, f"{e.desc}.load with {len(e.offsets)} offsets for a rank-{len(spec.shape)} "
                                    f"descriptor")
        block = [self.constexpr_dim(ir.Name(b, e.line) if not b.isdigit() else ir.Const(int(b), e.line), e.line,
                                    f"{e.desc}'s block dimension {b}") for b in spec.block]
        offs = [self.expr(o) for o in e.offsets]
        if any(o.shape or o.kind != "int" for o in offs):
            raise self.fail(e.line, f"{e.desc}.load offsets must be integer scalars")
        # a dimension is a parameter or constexpr of the kernel, or else a shape symbol of the contract
        dims = [z3.IntVal(int(d)) if d.isdigit() else self.z(self.expr(ir.Name(d, e.line)), ()) if d in self.env
                else self.var(d) for d in spec.shape]
        shape = tuple(block)
        side = self.side
        tensor = spec.view_of or e.desc
        if spec.view_of:
            viewed = self.c.param(spec.view_of)
            if not isinstance(viewed, TensorSpec) or viewed.is_descriptor or len(viewed.shape) != len(spec.shape) \
                    or any(viewed.shape[a] != n for a, n in zip(spec.view_dims, spec.shape)):
                raise self.fail(e.line, f"{e.desc} is declared a view of {spec.view_of}, whose axes it does not match")
        starts = [self.z(o, ()) for o in offs]

        def coord(d: int, l):
            # `x % m + i` is `(x + i) % m` where 0 <= x % m + i < m and m > 0 (Euclidean division): both forms, so
            # that a fact indexed by `j % m` finds j = x + i (smt.matched_instances looks into either branch; the
            # prover checks whichever it picks)
            o, step = starts[d], l[d]
            if z3.is_app_of(o, z3.Z3_OP_MOD) and not (isinstance(step, int) and step == 0):
                x, m = o.arg(0), o.arg(1)
                return z3.If(z3.And(m > 0, o + step >= 0, o + step < m), (x + step) % m, o + step)
            return z3.simplify(o + step)

        def coords(l):
            view = tuple(coord(d, l) for d in range(len(offs)))
            if not spec.view_of:
                return view
            out = [None] * len(view)
            for d, axis in enumerate(spec.view_dims):
                out[axis] = view[d]
            return tuple(out)

        def in_shape(l):
            return z3.And(*[z3.And(c >= 0, c < n) for c, n in zip((coord(d, l) for d in range(len(offs))), dims)])

        ptr = Tile("ptr", shape, lambda l: PtrElem(tensor, side, coords(l)), dtype=tensor)
        mask = Tile("bool", shape, in_shape)
        return self.load_tile(ptr, mask, const_tile(0.0) if spec.is_float else const_tile(0), e.line)

    def e_Load(self, e: ir.Load) -> Tile:
        ptr = self.expr(e.ptr)
        if ptr.kind != "ptr":
            raise self.fail(e.line, "tl.load of a non-pointer")
        if self.c.tensors[ptr.dtype].is_descriptor:
            raise self.fail(e.line, f"tl.load through tensor descriptor {ptr.dtype} (use {ptr.dtype}.load)")
        mask = self.expr(e.mask) if e.mask is not None else None
        other = self.expr(e.other) if e.other is not None else None
        return self.load_tile(ptr, mask, other, e.line)

    def load_tile(self, ptr: Tile, mask: Tile | None, other: Tile | None, line: int) -> Tile:
        shape = ptr.shape
        for t in (mask, other):
            if t is not None:
                shape = broadcast_shape(shape, t.shape)
        ptr = broadcast(ptr, shape)
        mask = broadcast(mask, shape) if mask is not None else None
        other = broadcast(other, shape) if other is not None else None
        spec = self.c.tensors[ptr.dtype]
        if self.recording:
            self.loads.append(LoadInfo(ptr.dtype, self.side, shape, ptr, mask, self.alive, tuple(self.loop_stack),
                                       line, next(self.seq)))
        if spec.is_float:
            def ffn(l):
                p = ptr.at(l)
                m = self.zb(mask, l) if mask is not None else None
                if other is not None:
                    o = self.fterm(other, l)
                else:
                    o = FUndef(f"masked load of {p.tensor} without `other`", line) if m is not None else None
                return FLoad(p.tensor, self.side, p.coords, m, o, line)
            return Tile("float", shape, ffn, dtype=spec.dtype)
        f = self.int_fn(ptr.dtype)

        def ifn(l):
            p = ptr.at(l)
            v = f(*p.coords)
            if mask is not None:
                v = z3.If(self.zb(mask, l), v, self.z(other, l) if other is not None else z3.IntVal(0))
            return Lin.const(v)
        if spec.dtype == "int1":
            return Tile("bool", shape, lambda l: ifn(l).coeff(None) != 0)
        return Tile("int", shape, ifn, wide=z3.BoolVal(True) if spec.dtype in ("int64", "uint64") else None)
