"""What a cached proof depends on: the catalog comes from the kernel modules themselves, the proof-cache
fingerprint is their import closure plus the proof code, a docstring or comment edit in the verifier does not
force a cold re-proof while a code edit does, and computing it imports neither torch nor vLLM."""
import subprocess
import sys
import textwrap
from pathlib import Path

from vosti_plugin.verifier import fingerprint
from vosti_plugin.verifier.api import catalog_entries, catalog_modules

ROOT = Path(__file__).resolve().parent.parent


def test_catalog_is_the_kernel_modules_own():
    import importlib

    by_module = {m: importlib.import_module(m).verifier_catalog() for m in catalog_modules()}
    assert all(entries for entries in by_module.values())
    for m, entries in by_module.items():
        assert {e["kernel"].fn.__module__ for e in entries} == {m}, m
    assert [e["kernel"] for e in catalog_entries()] == [e["kernel"] for es in by_module.values() for e in es]
    for p in (ROOT / "verifier").glob("*.py"):  # the verifier names no kernel-module internals
        text = p.read_text()
        assert "vosti_plugin.ops" not in text and "vosti_plugin.attention" not in text, p.name


def test_fingerprint_covers_the_kernel_modules_and_what_they_import_only():
    names = set(fingerprint.closure(catalog_modules()))
    assert set(catalog_modules()) <= names
    assert {"vosti_plugin.attention.config", "vosti_plugin.triton_mode", "vosti_plugin.verifier.contracts"} <= names
    assert not {n for n in names if "vllm" in n or n.endswith(("scheduler", "backend", "hooks_into_vllm"))}, names
    assert {"vosti_plugin.verifier.smt", "vosti_plugin.verifier.relational", "vosti_plugin.verifier.launch"} <= set(fingerprint.closure(("vosti_plugin.verifier.api",)))
    assert "vosti_plugin.verifier.bench" not in fingerprint.closure(("vosti_plugin.verifier.api",))


def _digest(tmp_path, name, source):
    p = tmp_path / f"{name.replace('.', '_')}_{abs(hash(source))}.py"
    p.write_text(textwrap.dedent(source))
    return fingerprint.file_digest(name, p)


def test_verifier_docstrings_and_comments_do_not_change_the_fingerprint_code_does(tmp_path):
    base = '''
        """Module doc."""
        def rule(x):
            """Doc."""
            return x + 1  # a comment
    '''
    redoc = '''
        """Module doc, reworded at length
        over two lines."""

        def rule(x):
            """Other doc."""
            # a new comment
            return x + 1
    '''
    code = base.replace("x + 1", "x + 2")
    assert _digest(tmp_path, "vosti_plugin.verifier.rules", base) == _digest(tmp_path, "vosti_plugin.verifier.rules", redoc)
    assert _digest(tmp_path, "vosti_plugin.verifier.rules", base) != _digest(tmp_path, "vosti_plugin.verifier.rules", code)
    # kernel modules: results quote their lines, so any edit there counts
    assert _digest(tmp_path, "vosti_plugin.k", base) != _digest(tmp_path, "vosti_plugin.k", redoc)


def test_fingerprint_imports_neither_torch_nor_vllm():
    code = ("import sys; sys.modules['vllm'] = None\n"
            "from vosti_plugin.verifier.api import _fingerprint\n"
            "assert _fingerprint(None)\n"
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, sorted(sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
