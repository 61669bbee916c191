"""Launch sites: a kernel's constexprs and num_warps must not depend on the batch.

The relational proofs hold for one config; they say nothing if the host picks the config from the batch
(a tile size from the longest sequence, a split count from the number of rows, a path from the workspace
size).  This pass reads the host wrappers of a module (Python source, `ast`) and follows values derived
from batch quantities -- `t.shape[0]`, `t.size(0)`, `t.numel()`, `len(t)`, `.item()`, `.max()`, and
parameters named like `max_seqlen*`, `num_tokens`, `num_seqs`, `batch*` -- through assignments; every
launch `kernel[grid](..., NAME=expr)` whose constexpr (or num_warps) reads such a value is reported as a
`launch-config` obligation with its line.  Grids and runtime arguments may depend on the batch.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from verifier.report import Obligation

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


class _Taint(ast.NodeVisitor):
    def __init__(self, fn: ast.FunctionDef, kernels: dict[str, set[str]], module: str):
        self.fn, self.kernels, self.module = fn, kernels, module
        self.tainted: dict[str, str] = {}
        for a in fn.args.args + fn.args.kwonlyargs:
            if BATCH_PARAM.match(a.arg):
                self.tainted[a.arg] = f"parameter {a.arg}"
        self.findings: list[LaunchFinding] = []
        self.defined: set[str] = {a.arg for a in fn.args.args + fn.args.kwonlyargs}

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
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.assign(node.target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, node.value)
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
            constexprs = self.kernels[f.value.id]
            for kw in node.keywords:
                if kw.arg in constexprs or kw.arg in CONFIG_KWARGS:
                    w = self.why(kw.value)
                    if w:
                        self.findings.append(LaunchFinding(self.module, self.fn.name, f.value.id, kw.arg,
                                                           kw.value.lineno, w))
        self.generic_visit(node)


def check_module_source(source: str, module: str = "<string>") -> list[LaunchFinding]:
    tree = ast.parse(source)
    kernels: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            kernels[node.name] = {a.arg for a in node.args.args
                                  if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
    findings: list[LaunchFinding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name not in kernels:
            t = _Taint(node, kernels, module)
            # two passes: a name may be tainted by a later assignment inside a loop
            t.visit(node)
            t.findings = []
            t.defined = {a.arg for a in node.args.args + node.args.kwonlyargs}
            t.visit(node)
            findings.extend(t.findings)
    return findings


def check_module(path: str | Path) -> list[LaunchFinding]:
    p = Path(path)
    return check_module_source(p.read_text(), str(p))


def obligations(findings: list[LaunchFinding]) -> list[Obligation]:
    return [Obligation("launch-config", f.line, "failed",
                       f"{f.function} launches {f.kernel} with {f.name} depending on the batch: {f.because}")
            for f in findings]
