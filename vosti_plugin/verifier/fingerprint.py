"""What a proof depends on, hashed without importing it (importing the kernel modules pulls in torch).

A cached proof is reused only while every input of it is unchanged, so the hash covers:
  - the first-party modules a kernel module imports, transitively (its jit helpers, the constants and the
    catalog code its configs come from), found by reading `import` statements anywhere in each file
    (function-local ones too) and resolved to files without importing them;
  - the verifier modules the proof code imports, transitively, from `vosti_plugin.verifier.api`;
  - the versions of Python (its `ast`), Triton and Z3 the proof ran with.
Verifier files are hashed as their syntax tree without docstrings and without positions: comments and
docstrings cannot change a proof, and no result quotes a verifier line. Kernel-side files are hashed as
their bytes: results quote kernel lines, so an edit there refreshes them (and re-proves only the kernels
of that module's closure). Anything a proof reads that is not Python source reached this
way (a data file, an environment variable other than TRITON_INTERPRET) would make this hash unsound; the
verifier reads none.
"""
from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import json
import os
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

_VERIFIER = __name__.rpartition(".")[0]   # vosti_plugin.verifier
_OWN = _VERIFIER.split(".")[0]
# first-party packages: the verifier's own and those of the roots a digest starts from (the kernel modules')


@lru_cache(maxsize=None)
def _package_dir(top: str) -> Path | None:
    if top == _OWN:
        return Path(__file__).resolve().parents[1]
    try:
        spec = importlib.util.find_spec(top)  # imports nothing: `top` is a top-level name
    except (ImportError, ValueError):
        return None
    return Path(spec.origin).parent if spec is not None and spec.origin and spec.origin.endswith("__init__.py") \
        else None


def module_file(name: str) -> Path | None:
    """The source file of module `name` (a package's __init__.py) when it is Python source, or None."""
    top, *rest = name.split(".")
    base = _package_dir(top)
    if base is None:
        return None
    p = base.joinpath(*rest)
    for cand in (p.with_suffix(".py"), p / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports(name: str, tree: ast.AST, is_package: bool, parties: frozenset) -> set[str]:
    out: set[str] = set()
    pkg = name if is_package else name.rpartition(".")[0]
    # a package's __init__ runs only its top-level code when a submodule is imported; a module's functions
    # may run during a proof (its verifier_catalog(), its jit helpers), so their imports are followed too
    nodes = tree.body if is_package else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import submodule`
    found = set()
    for m in out:
        if m.split(".")[0] in parties:
            parts = m.split(".")  # importing a.b.c runs a/__init__ and a/b/__init__ too
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return found


def closure(roots: tuple[str, ...]) -> dict[str, Path]:
    """Every first-party module reachable from `roots` through import statements -> its file."""
    seen: dict[str, Path] = {}
    todo = list(roots)
    parties = frozenset({_OWN} | {r.split(".")[0] for r in roots})
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name)
        if path is None:
            continue
        seen[name] = path
        todo += sorted(set(_facts(name, path, parties)["imports"]) - set(seen))
    _save_memo()
    return seen


# Parsing and dumping every file costs seconds; what each file yields (its imports, its normalized digest)
# is a function of its name and bytes, so it is memoized on disk under the sha256 of both.
_MEMO: dict[str, dict] | None = None
_MEMO_DIRTY = False


def _memo_path() -> Path:
    env = os.environ.get("VOSTI_CACHE_DIR")
    return (Path(env) if env else Path.home() / ".cache" / "vosti") / "verifier" / "fingerprint-memo.json"


def _facts(name: str, path: Path, parties: frozenset = frozenset({_OWN})) -> dict:
    global _MEMO, _MEMO_DIRTY
    if _MEMO is None:
        try:
            _MEMO = json.loads(_memo_path().read_text())
        except (OSError, ValueError):
            _MEMO = {}
    raw = path.read_bytes()
    key = hashlib.sha256(f"{_RULES}|{toolchain()}|{name}|{sorted(parties)}|".encode() + raw).hexdigest()
    facts = _MEMO.get(key)
    if facts is None:
        tree = ast.parse(raw, str(path))
        facts = {"imports": sorted(_imports(name, tree, path.name == "__init__.py", parties)),
                 "digest": _digest_of(name, tree, raw)}
        _MEMO[key] = facts
        _MEMO_DIRTY = True
    return facts


def _save_memo() -> None:
    global _MEMO_DIRTY
    if not _MEMO_DIRTY or _MEMO is None:
        return
    path = _memo_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(_MEMO))
        os.replace(tmp, path)
        _MEMO_DIRTY = False
    except OSError:
        pass


def _without_docstrings(tree: ast.AST) -> ast.AST:
    tree = copy.deepcopy(tree)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def file_digest(name: str, path: Path) -> str:
    return _facts(name, path)["digest"]


_RULES = "2"  # bump when _imports or _digest_of change what they compute


def _digest_of(name: str, tree: ast.AST, raw: bytes) -> str:
    if name == _VERIFIER or name.startswith(_VERIFIER + "."):
        text = ast.dump(_without_docstrings(tree), include_attributes=False).encode()
    else:
        text = raw  # results quote kernel-module lines: any edit there refreshes them
    return hashlib.sha256(name.encode() + b"\n" + text).hexdigest()


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


@lru_cache(maxsize=None)
def toolchain() -> str:
    return f"python {sys.version_info[:3]} triton {_version('triton')} z3 {_version('z3-solver')}"


def digest(roots: tuple[str, ...], *extra: str) -> str:
    """Hash of the modules reachable from `roots`, the toolchain, and `extra` strings."""
    h = hashlib.sha256(f"{_RULES}|{toolchain()}".encode())
    for e in extra:
        h.update(b"\0" + e.encode())
    for name, path in sorted(closure(roots).items()):
        h.update(file_digest(name, path).encode())
    return h.hexdigest()


def verifier_digest() -> str:
    """The proof code: vosti_plugin.verifier.api and every verifier module it imports (not bench, not the catalogs)."""
    return digest(("vosti_plugin.verifier.api",))
