"""Launch sites: what a kernel proof assumes of its launches.

The relational proofs hold for one config, for the contract's grid, and for launches that agree on the
scalars a goal lists in `same`; they say nothing if the host picks the config from the batch (a tile size
from the longest sequence, a split count from the number of rows, a path from the workspace size).  This
pass reads the host wrappers of a module (Python source, `ast`) and follows values derived from batch
quantities -- `t.shape[0]`, `t.size(0)`, `t.numel()`, `len(t)`, `.item()`, `.max()`, and parameters named
like `max_seqlen*`, `num_tokens`, `num_seqs`, `batch*` -- through assignments.  At every launch
`kernel[grid](...)`, arguments are bound to the kernel's parameters by position and by keyword, and:
  * launch-config: a constexpr (or num_warps) reads a batch quantity; or the kernel is wrapped in
    @triton.autotune / @triton.heuristics, which choose constexprs at run time from the arguments;
  * launch-scalar: a runtime scalar that a goal of the kernel's contract lists in `same` (the proof
    assumes both launches pass the same value) reads a batch quantity;
  * launch-grid: an axis of the launch grid is not the contract's grid axis with this launch's arguments
    (compared as expressions after following the wrapper's assignments; `x.shape[d]` of a tensor passed
    to the kernel must be the contract's symbol of that dimension).  A smaller grid leaves rows unwritten.
  * launch-guard (modules of the shipped catalog): the statement right before the launch is not
    `guard.check(kernel, grid, **constexprs)` with the launch's grid and every constexpr keyword of the
    launch as the same expression (vosti_plugin/launch/guard.py checks those values at run time), the
    dependent-launch gate PDL aside;
  * launch-pdl: the launch asks for programmatic dependent launch (`launch_pdl=`) without passing the kernel's
    PDL the same expression.
Grids and runtime arguments that the contract lets differ may depend on the batch.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from vosti_plugin.verifier import serial
# The dependent-launch gate (vosti_plugin/ops/dependent_launch.py): the front end admits it only as the gate of the
# kernel's opening wait, which it drops, so it selects no computation and the launch guard need not see it; a launch
# that asks for PDL (`launch_pdl=`) must pass the kernel's PDL the same expression (the wait is then compiled in).
from vosti_plugin.verifier.frontend import DEPENDENCY_WAIT_FLAG
from vosti_plugin.verifier.report import Obligation

TUNERS = {"autotune": "@triton.autotune picks the config at run time by timing candidates keyed on the arguments",
          "heuristics": "@triton.heuristics computes constexprs at run time from the arguments"}
BATCH_PARAM = re.compile(r"^(max_seq_?len\w*|max_seqlen\w*|num_tokens|num_seqs|num_reqs|batch\w*|n_rows|rows)$")
SOURCE_METHODS = {"numel", "item", "max", "tolist", "sum"}
CONFIG_KWARGS = {"num_warps"}


@dataclass(frozen=True)
class LaunchFinding:
    module: str
    function: str
    kernel: str
    name: str
    line: int
    because: str
    obligation: str = "launch-config"


def _is_source(node: ast.AST) -> str | None:
    """Why node is a batch quantity itself (None if it is not)."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        idx = node.slice
        if isinstance(idx, ast.Constant) and idx.value == 0:
            return f"{ast.unparse(node)} (leading dimension)"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "size" and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == 0:
            return f"{ast.unparse(node)} (leading dimension)"
        if node.func.attr in SOURCE_METHODS:
            return f"{ast.unparse(node)} (data-dependent)"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
        return f"{ast.unparse(node)} (length)"
    return None


@dataclass
class KernelInfo:
    params: list  # parameter names in order
    constexprs: set
    tuner: str = ""  # "autotune" / "heuristics" when so decorated
    tuner_line: int = 0
    same: set = None  # runtime scalars some goal of its contract lists in `same`
    contract: object = None


class _Taint(ast.NodeVisitor):
    def __init__(self, fn: ast.FunctionDef, kernels: dict[str, KernelInfo], module: str, require_guard: bool = False):
        self.fn, self.kernels, self.module = fn, kernels, module
        self.require_guard = require_guard
        self.before: dict[int, ast.stmt | None] = {}  # id(call of an expression statement) -> previous statement
        for node in ast.walk(fn):
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(node, field, None)
                if isinstance(stmts, list):
                    for i, st in enumerate(stmts):
                        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                            self.before[id(st.value)] = stmts[i - 1] if i else None
        self.values: dict[str, ast.AST] = {a.arg: None for a in fn.args.args + fn.args.kwonlyargs}  # for grids
        self.tainted: dict[str, str] = {}
        for a in fn.args.args + fn.args.kwonlyargs:
            if BATCH_PARAM.match(a.arg):
                self.tainted[a.arg] = f"parameter {a.arg}"
        self.findings: list[LaunchFinding] = []
        self.defined: set[str] = {a.arg for a in fn.args.args + fn.args.kwonlyargs}

    def track(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.set_value(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, t in enumerate(target.elts):
                if isinstance(value, (ast.Tuple, ast.List)) and i < len(value.elts):
                    self.track(t, value.elts[i])
                else:
                    self.track(t, ast.Subscript(value, ast.Constant(i)))
        else:
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    self.values[n.id] = None

    def set_value(self, name: str, value: ast.AST) -> None:
        """A name assigned once stands for its value in grids; one assigned twice stays a name."""
        mentions_itself = any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value))
        self.values[name] = None if name in self.values or mentions_itself else value

    def why(self, node: ast.AST | None) -> str | None:
        if node is None:
            return None
        for sub in ast.walk(node):
            src = _is_source(sub)
            if src:
                return src
            if isinstance(sub, ast.Name) and sub.id in self.tainted:
                return f"{sub.id} <- {self.tainted[sub.id]}"
        return None

    def assign(self, target: ast.AST, value: ast.AST) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                self.defined.add(n.id)

        if isinstance(target, ast.Name):
            w = self.why(value)
            if w:
                self.tainted.setdefault(target.id, w)
        elif isinstance(target, (ast.Tuple, ast.List)):
            shape_of = value.attr == "shape" if isinstance(value, ast.Attribute) else False
            for i, t in enumerate(target.elts):
                if shape_of:
                    if i == 0 and isinstance(t, ast.Name):
                        self.tainted.setdefault(t.id, f"{ast.unparse(value)}[0] (leading dimension)")
                elif isinstance(value, (ast.Tuple, ast.List)) and i < len(value.elts):
                    self.assign(t, value.elts[i])
                else:
                    self.assign(t, value)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self.assign(t, node.value)
            self.track(t, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.assign(node.target, node.value)
        if isinstance(node.target, ast.Name):
            self.values[node.target.id] = None
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, node.value)
            self.track(node.target, node.value)
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        # a name that a batch-dependent condition can give one of two values depends on the batch (one
        # that is only defined when the branch runs, e.g. `if rows > 0: cfg = ...; launch`, does not)
        w = self.why(node.test)
        if w:
            def names(stmts):
                out = set()
                for st in stmts:
                    for sub in ast.walk(st):
                        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                            for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
                return out
            body, other = names(node.body), names(node.orelse)
            for n in (body & other) | ((body | other) & self.defined):
                self.tainted.setdefault(n, f"chosen by `if {ast.unparse(node.test)}`: {w}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id in self.kernels:
            self.launch(node, f.value.id, f.slice)
        self.generic_visit(node)

    def add(self, kernel: str, name: str, line: int, because: str, obligation: str = "launch-config") -> None:
        self.findings.append(LaunchFinding(self.module, self.fn.name, kernel, name, line, because, obligation))

    def launch(self, node: ast.Call, kernel: str, grid: ast.AST) -> None:
        info = self.kernels[kernel]
        if info.tuner:
            self.add(kernel, info.tuner, node.lineno, f"{TUNERS[info.tuner]} (decorator at line {info.tuner_line}); "
                     f"pin one config and pass its constexprs at the launch")
        bound: dict[str, ast.AST] = dict(zip(info.params, node.args))
        if len(node.args) > len(info.params):
            self.add(kernel, "*args", node.lineno, "more positional arguments than the kernel has parameters")
        for kw in node.keywords:
            if kw.arg is None:
                self.add(kernel, "**kwargs", node.lineno, "arguments passed as **kwargs cannot be checked")
                continue
            bound[kw.arg] = kw.value
        for name, value in bound.items():
            how = "positional " if value in node.args else ""
            if name in info.constexprs or name in CONFIG_KWARGS:
                w = self.why(value)
                if w:
                    self.add(kernel, name, value.lineno, f"{how}{w}")
            elif info.same and name in info.same:
                w = self.why(value)
                if w:
                    self.add(kernel, name, value.lineno, f"runtime scalar {name}, which the contract needs equal in "
                             f"both launches (`same`), is computed from the batch: {w}", "launch-scalar")
        if "launch_pdl" in bound and (DEPENDENCY_WAIT_FLAG not in info.constexprs or DEPENDENCY_WAIT_FLAG not in bound
                                      or ast.dump(bound[DEPENDENCY_WAIT_FLAG]) != ast.dump(bound["launch_pdl"])):
            self.add(kernel, "launch_pdl", node.lineno, f"launch_pdl={ast.unparse(bound['launch_pdl'])} without "
                     f"{DEPENDENCY_WAIT_FLAG}= the same expression: launched early, the kernel would not wait for the "
                     f"kernel before it", "launch-pdl")
        if info.contract is not None:
            self.check_grid(node, kernel, info, grid, bound)
            if self.require_guard:
                self.check_guard(node, kernel, info, grid)

    def check_guard(self, node: ast.Call, kernel: str, info: KernelInfo, grid: ast.AST) -> None:
        prev = self.before.get(id(node))
        call = prev.value if isinstance(prev, ast.Expr) and isinstance(prev.value, ast.Call) else None
        if call is None or not ast.unparse(call.func).endswith("guard.check") or len(call.args) != 2 or \
                ast.unparse(call.args[0]) != kernel:
            self.add(kernel, "guard", node.lineno, f"the statement before this launch is not guard.check({kernel}, "
                     f"grid, **constexprs): the runtime launch guard would not see this launch", "launch-guard")
            return
        if ast.dump(call.args[1]) != ast.dump(grid):
            self.add(kernel, "guard", node.lineno, f"guard.check sees grid {ast.unparse(call.args[1])}, the launch "
                     f"uses {ast.unparse(grid)}", "launch-guard")
        checked = {k.arg: k.value for k in call.keywords}
        if None in checked:
            self.add(kernel, "guard", call.lineno, "guard.check(..., **kwargs) cannot be compared to the launch",
                     "launch-guard")
            return
        guarded = info.constexprs - {DEPENDENCY_WAIT_FLAG}
        launched = {k.arg: k.value for k in node.keywords if k.arg in guarded}
        for name in sorted(guarded - set(launched)):
            self.add(kernel, name, node.lineno, f"constexpr {name} is not passed by keyword, so guard.check cannot "
                     f"be compared with it", "launch-guard")
        for name, value in launched.items():
            if name not in checked or ast.dump(checked[name]) != ast.dump(value):
                self.add(kernel, name, call.lineno, f"guard.check is given {name}="
                         f"{ast.unparse(checked[name]) if name in checked else '(nothing)'}, the launch {name}="
                         f"{ast.unparse(value)}", "launch-guard")
        for name in sorted(set(checked) - set(launched)):
            if name in info.params:  # a value the launch passes (positionally) must not be restated
                self.add(kernel, name, call.lineno, f"guard.check restates kernel argument {name}", "launch-guard")

    # -- grids -------------------------------------------------------------------------------------
    def resolve(self, e: ast.AST, depth: int = 0) -> ast.AST:
        """e with local names replaced by what the wrapper assigned them (a few levels deep)."""
        if depth > 6:
            return e

        class Sub(ast.NodeTransformer):
            def visit_Name(s, n):  # noqa: N805
                v = self.values.get(n.id)
                return self.resolve(v, depth + 1) if v is not None and v is not n else n

            def visit_Subscript(s, n):  # noqa: N805
                n = s.generic_visit(n)
                if isinstance(n.value, (ast.Tuple, ast.List)) and isinstance(n.slice, ast.Constant) \
                        and isinstance(n.slice.value, int) and n.slice.value < len(n.value.elts):
                    return n.value.elts[n.slice.value]
                return n
        return Sub().visit(_copy(e))

    def check_grid(self, node: ast.Call, kernel: str, info: KernelInfo, grid: ast.AST, bound: dict) -> None:
        spec = info.contract
        g = self.resolve(grid)
        axes = g.elts if isinstance(g, (ast.Tuple, ast.List)) else None
        if axes is None:
            self.add(kernel, "grid", node.lineno, f"the grid {ast.unparse(grid)} is not a tuple the check can read "
                     f"(a lambda or a computed value); the contract's grid is {spec.grid}", "launch-grid")
            return
        if len(axes) != len(spec.grid):
            self.add(kernel, "grid", node.lineno, f"the launch grid has {len(axes)} axes, the contract's "
                     f"{len(spec.grid)} ({', '.join(spec.grid)})", "launch-grid")
            return
        tensors = {n: t for n, t in spec.params if hasattr(t, "shape")}
        for i, (axis, want) in enumerate(zip(axes, spec.grid)):
            got = _norm(self.resolve(axis), {}, None)
            exp = _norm(ast.parse(want, mode="eval").body, bound, (self, tensors))
            if exp is None:  # the contract's axis names a value this launch does not pass (a catalog key)
                continue
            def holders(expr: str) -> list:
                return [t for n, t in tensors.items() if n in bound and ast.unparse(self.resolve(bound[n])) == expr]
            if not _match(got, exp, holders):
                self.add(kernel, f"grid[{i}]", node.lineno,
                         f"launch grid axis {i} is {ast.unparse(axis)} but the contract's grid axis is {want}: "
                         f"programs the proof counts on may not run (rows left unwritten) or extra ones may",
                         "launch-grid")


def check_module_source(source: str, module: str = "<string>", contracts: dict | None = None,
                        require_guard: bool = False) -> list[LaunchFinding]:
    """contracts: kernel name -> Contract (enables the `same` and grid checks); require_guard: every launch of
    a contracted kernel must be preceded by its guard.check (modules of the shipped catalog)."""
    with serial.LOCK:
        tree = ast.parse(source)
    kernels: dict[str, KernelInfo] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            info = KernelInfo([a.arg for a in node.args.args],
                              {a.arg for a in node.args.args
                               if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)})
            for d in node.decorator_list:
                text = ast.unparse(d.func if isinstance(d, ast.Call) else d)
                for t in TUNERS:
                    if text.endswith(t):
                        info.tuner, info.tuner_line = t, d.lineno
            spec = (contracts or {}).get(node.name)
            if spec is not None:
                info.contract = spec
                params = dict(spec.params)
                info.same = {n for g in spec.verif for n in g.same
                             if n in info.params and not hasattr(params.get(n), "shape")}
            kernels[node.name] = info
    findings: list[LaunchFinding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name not in kernels:
            t = _Taint(node, kernels, module, require_guard)
            # two passes: a name may be tainted by a later assignment inside a loop
            t.visit(node)
            t.findings = []
            t.values = {a.arg: None for a in node.args.args + node.args.kwonlyargs}
            t.defined = {a.arg for a in node.args.args + node.args.kwonlyargs}
            t.visit(node)
            findings.extend(t.findings)
    return findings


def check_module(path: str | Path, module: object = None, require_guard: bool = False) -> list[LaunchFinding]:
    """module: the imported module (for the kernels' contracts); by default imported by its dotted name
    when the file lies in this repository."""
    p = Path(path)
    if module is None:
        module = _import(p)
    contracts = {}
    if module is not None:
        from vosti_plugin.verifier.contracts import contract_of
        for name, obj in vars(module).items():
            spec = contract_of(obj)
            if spec is not None:
                contracts[getattr(getattr(obj, "fn", obj), "__name__", name)] = spec
    return check_module_source(p.read_text(), str(p), contracts, require_guard)


def _import(p: Path):
    import importlib

    root = Path(__file__).resolve().parent.parent
    try:
        rel = p.resolve().relative_to(root).with_suffix("")
    except ValueError:
        return None
    try:
        return importlib.import_module(".".join(rel.parts))
    except Exception:  # noqa: BLE001 - a module that does not import gets the contract-free checks only
        return None


def _copy(e: ast.AST) -> ast.AST:
    import copy
    return copy.deepcopy(e)


_CALL_NAMES = {"triton.cdiv": "cdiv", "cdiv": "cdiv", "int": "", "max": "max", "min": "min", "ite": "ite"}


def _norm(e: ast.AST, bound: dict, contract_side) -> object:
    """A comparable tree: tuples of (op, children...); shapes as ("shape", tensor expr, dim).  On the
    contract side (contract_side = (taint, tensors)) names are bound to the launch's arguments and shape
    symbols to ("dim", symbol); None when the contract names something the launch does not pass."""
    rec = lambda x: _norm(x, bound, contract_side)  # noqa: E731
    if isinstance(e, ast.Constant):
        return ("const", e.value)
    if isinstance(e, ast.Name):
        if contract_side is not None:
            taint, tensors = contract_side
            if e.id in bound:
                return _norm(taint.resolve(bound[e.id]), {}, None)
            if any(e.id in t.shape for t in tensors.values()):
                return ("dim", e.id)
            return None
        return ("name", e.id)
    if isinstance(e, ast.Attribute):
        return ("attr", ast.unparse(e))
    if isinstance(e, ast.BinOp):
        a, b = rec(e.left), rec(e.right)
        return None if a is None or b is None else (type(e.op).__name__, a, b)
    if isinstance(e, ast.IfExp):
        parts = [rec(e.test), rec(e.body), rec(e.orelse)]
        return None if None in parts else ("ite", *parts)
    if isinstance(e, ast.Subscript):
        if isinstance(e.value, ast.Attribute) and e.value.attr == "shape" and isinstance(e.slice, ast.Constant):
            return ("shape", ast.unparse(e.value.value), e.slice.value)
        return ("sub", ast.unparse(e))
    if isinstance(e, ast.Call):
        f = ast.unparse(e.func)
        if f.endswith(".size") and len(e.args) == 1 and isinstance(e.args[0], ast.Constant):
            return ("shape", ast.unparse(e.func.value), e.args[0].value)
        name = _CALL_NAMES.get(f, f)
        args = [rec(a) for a in e.args]
        if None in args:
            return None
        if name == "" and len(args) == 1:
            return args[0]
        if name == "ite":
            return ("ite", *args)
        return ("call", name, *args)
    return ("expr", ast.unparse(e))


def _match(got, exp, holders) -> bool:
    """got (the launch's axis) equals exp (the contract's); a contract dimension symbol matches the shape of
    a tensor bound to a parameter with that symbol at that dimension, or the shape of a tensor the kernel is
    not passed (which the check cannot relate to the kernel's parameters)."""
    if isinstance(exp, tuple) and exp and exp[0] == "dim":
        if isinstance(got, tuple) and got and got[0] == "shape":
            specs = holders(got[1])
            return not specs or any(got[2] < len(t.shape) and t.shape[got[2]] == exp[1] for t in specs)
        return False
    if isinstance(got, tuple) and isinstance(exp, tuple):
        return len(got) == len(exp) and all(_match(a, b, holders) for a, b in zip(got, exp))
    return got == exp


def obligations(findings: list[LaunchFinding]) -> list[Obligation]:
    return [Obligation(f.obligation, f.line, "failed", f"{f.function} launches {f.kernel}: {f.name}: {f.because}")
            for f in findings]
