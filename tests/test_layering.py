"""Only vosti_plugin/vllm/ imports vLLM. Every other runtime module of vosti_plugin reaches vLLM through it,
and imports the adapter at module level only through `vosti_plugin.vllm.compat` (which imports vLLM inside
its functions only) or as one of the public-path shims below.

The tooling in vosti_plugin/integration/ (demo, harness, benchmarks, tiny model, reference forward) drives
vLLM as a user does, so it may import vLLM's API; the runtime never imports it (the CLI's commands load it
on demand), and the verifier imports neither it nor vLLM."""
from __future__ import annotations

import ast
import shutil
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ADAPTER = "vosti_plugin/vllm/"
TOOLING = "vosti_plugin/integration/"
FRONT_DOOR = {"vosti_plugin/cli.py"}   # its commands import the tooling they run, inside the command
# Public class paths that must stay importable under their old names; each is the adapter module itself.
SHIMS = {
    # vLLM's CUSTOM backend points at vosti_plugin.attention.backend.VostiAttentionBackend (selection.BACKEND_PATH);
    # the shim *is* the adapter module (sys.modules alias) so tests that monkeypatch its workspace reach it.
    "vosti_plugin/attention/backend.py": "public backend class path",
}
# Adapter modules other modules may import at module level: they import vLLM only inside functions.
IMPORT_TIME_FREE = {"vosti_plugin.vllm", "vosti_plugin.vllm.compat"}


def _is_vllm(name: str | None) -> bool:
    return bool(name) and (name == "vllm" or name.startswith("vllm."))


def _imported_names(node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        if node.module == "vosti_plugin":
            return [f"vosti_plugin.{a.name}" for a in node.names]
        if node.module == "vosti_plugin.vllm":
            return [f"vosti_plugin.vllm.{a.name}" for a in node.names]
        return [node.module]
    if isinstance(node, ast.Call):   # importlib.import_module("vllm...") / __import__("vllm...")
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
        if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def _walk(tree):
    """(node, at_module_level) for every node; function bodies are not module level, class bodies are."""
    stack = [(tree, True)]
    while stack:
        node, top = stack.pop()
        yield node, top
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def violations(source: str, rel: str) -> list[str]:
    """'file:line: why' for every vLLM import (anywhere) and every import-time use of the adapter."""
    found = []
    for node, top in _walk(ast.parse(source, filename=rel)):
        for name in _imported_names(node):
            if _is_vllm(name):
                found.append(f"{rel}:{node.lineno}: imports {name} (only {ADAPTER} may import vllm)")
            elif top and name.startswith("vosti_plugin.vllm") and name not in IMPORT_TIME_FREE \
                    and rel not in SHIMS:
                found.append(f"{rel}:{node.lineno}: imports {name} at module level (vLLM at import time)")
    return sorted(found, key=lambda v: int(v.split(":")[1]))


def scan(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "vosti_plugin").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith((ADAPTER, TOOLING)):
            found += violations(path.read_text(), rel)
    return found


def tooling_imports(source: str, rel: str) -> list[str]:
    """'file:line: why' for every import of the tooling package from a runtime module."""
    return [f"{rel}:{node.lineno}: imports {name} (runtime code never imports {TOOLING})"
            for node, _ in _walk(ast.parse(source, filename=rel)) for name in _imported_names(node)
            if name == "vosti_plugin.integration" or name.startswith("vosti_plugin.integration.")]


def scan_runtime_for_tooling(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "vosti_plugin").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith(TOOLING) and rel not in FRONT_DOOR:
            found += tooling_imports(path.read_text(), rel)
    return found


def test_the_runtime_never_imports_the_tooling():
    assert scan_runtime_for_tooling(ROOT) == []


def test_a_tooling_import_in_a_runtime_module_is_named():
    (found,) = tooling_imports("def f():\n    from vosti_plugin.integration.tiny_model import ensure_tiny_model\n",
                               "vosti_plugin/launch/x.py")
    assert found.startswith("vosti_plugin/launch/x.py:2: imports vosti_plugin.integration.tiny_model")


def test_the_verifier_imports_neither_vllm_nor_the_adapter_nor_the_tooling():
    bad = []
    for path in sorted((ROOT / "vosti_plugin" / "verifier").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node, _ in _walk(ast.parse(path.read_text(), filename=rel)):
            bad += [f"{rel}:{node.lineno}: {n}" for n in _imported_names(node)
                    if _is_vllm(n) or n.startswith(("vosti_plugin.vllm", "vosti_plugin.integration"))]
    assert bad == []


def test_only_namespaced_packages_are_shipped():
    """setuptools installs what `packages.find` includes: only vosti_plugin and its subpackages, so
    nothing generic (`verifier`, `integration`) lands at the top level of a deployment's environment."""
    import tomllib

    from setuptools import find_packages

    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    shipped = find_packages(str(ROOT), include=find["include"], exclude=find.get("exclude", ()))
    assert shipped and {p.split(".")[0] for p in shipped} == {"vosti_plugin"}
    assert {"vosti_plugin.verifier", "vosti_plugin.integration", "vosti_plugin.integration.harness"} <= set(shipped)


def test_only_the_adapter_imports_vllm():
    assert scan(ROOT) == []


def test_import_time_free_adapter_modules_import_no_vllm_at_module_level():
    for module in IMPORT_TIME_FREE:
        path = ROOT / (module.replace(".", "/") + ("/__init__.py" if module == "vosti_plugin.vllm" else ".py"))
        top = [n.lineno for n, at_top in _walk(ast.parse(path.read_text()))
               if at_top and any(_is_vllm(x) for x in _imported_names(n))]
        assert top == [], f"{path.relative_to(ROOT)} imports vllm at module level on lines {top}"


@pytest.mark.parametrize("source, line, what", [
    ("import vllm\n", 1, "imports vllm "),
    ("import os\nimport vllm.platforms as p\n", 2, "imports vllm.platforms"),
    ("x = 1\nfrom vllm.config import VllmConfig\n", 2, "imports vllm.config"),
    ("def f():\n    if True:\n        from vllm import LLM\n", 3, "imports vllm "),
    ("class C:\n    def m(self):\n        import vllm.v1\n", 3, "imports vllm.v1"),
    ("import importlib\nm = importlib.import_module('vllm.platforms')\n", 2, "imports vllm.platforms"),
    ("from vosti_plugin.vllm import patches\n", 1, "at module level"),
    ("from vosti_plugin.vllm.scheduler import VostiScheduler\n", 1, "at module level"),
])
def test_each_kind_of_vllm_import_is_named_with_its_line(source, line, what):
    (found,) = violations(source, "vosti_plugin/x.py")
    assert found.startswith(f"vosti_plugin/x.py:{line}:") and what in found


@pytest.mark.parametrize("source", [
    "from vosti_plugin.vllm import compat\n",
    "def f():\n    from vosti_plugin.vllm import patches\n",
    "import vllmx\nfrom vosti_plugin import selection\n",
    "s = 'import vllm'\n",
])
def test_allowed_imports_pass(source):
    assert violations(source, "vosti_plugin/x.py") == []


def test_the_scan_fails_on_an_import_injected_into_a_copy_of_the_package(tmp_path):
    shutil.copytree(ROOT / "vosti_plugin", tmp_path / "vosti_plugin",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "vosti_plugin" / "selection.py"
    lines = target.read_text().splitlines()
    lines.append(textwrap.dedent("""
        def _sneaky():
            from vllm.platforms import current_platform
            return current_platform
    """))
    target.write_text("\n".join(lines) + "\n")
    injected = len(target.read_text().splitlines()) - 2
    assert scan(tmp_path) == [f"vosti_plugin/selection.py:{injected}: imports vllm.platforms "
                              f"(only {ADAPTER} may import vllm)"]
