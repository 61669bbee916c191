"""The verifier rejects every kernel of the negative corpus, naming the broken obligation and a line
inside the kernel, and proves the positive examples (tests/verifier_corpus/)."""
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest

from vosti_plugin.verifier.api import verify_kernel
from vosti_plugin.verifier.contracts import contract_of
from vosti_plugin.verifier.launch import check_module, obligations

CORPUS = Path(__file__).parent / "verifier_corpus"
ROOT = Path(__file__).parent.parent


def _load(path: Path):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    name = f"tests.verifier_corpus.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _kernels(mod):
    return [v for v in vars(mod).values() if contract_of(v) is not None and hasattr(v, "fn")]


NEGATIVE = sorted(p for p in CORPUS.glob("bad_*.py"))
POSITIVE = sorted(p for p in CORPUS.glob("good_*.py"))


def test_corpus_covers_the_known_failure_modes():
    names = {p.stem for p in NEGATIVE}
    assert {"bad_split_depends_on_m", "bad_tile_from_batch_shape", "bad_fixed_num_splits",
            "bad_masked_tile_resets_max", "bad_reads_beyond_prefix", "bad_atomic_accumulate",
            "bad_loop_bound_from_other_request", "bad_launch_tile_from_max_seqlen"} <= names


@pytest.mark.parametrize("module", ["vosti_plugin/ops/matmul.py", "vosti_plugin/ops/rmsnorm.py",
                                    "vosti_plugin/ops/softmax.py", "vosti_plugin/attention/kv_write.py",
                                    "vosti_plugin/attention/paged_attention.py"])
def test_shipped_launches_take_constexprs_from_the_model_only(module):
    assert check_module(ROOT / module) == []


def _bug_line(path: Path) -> int | None:
    """The line a mutant marks `# BUG`: where its defect is, and the line the verifier must name."""
    for i, text in enumerate(path.read_text().splitlines(), 1):
        if text.rstrip().endswith("# BUG"):
            return i
    return None


def _python_fn(kernel):
    fn = kernel.fn
    while hasattr(fn, "fn"):  # an autotuner or heuristics wraps a JITFunction
        fn = fn.fn
    return fn


@pytest.mark.parametrize("path", NEGATIVE, ids=lambda p: p.stem)
def test_broken_kernel_is_rejected_with_the_named_obligation(path):
    mod = _load(path)
    bug = _bug_line(path)
    if getattr(mod, "LAUNCH", False):  # a host wrapper breaking what the kernel proof assumes of its launch
        found = obligations(check_module(path, module=mod))
        assert found and {o.name for o in found} == {mod.EXPECT}, found
        if bug is not None:
            assert bug in {o.line for o in found}, (bug, found)
        if path.stem == "bad_launch_tile_from_max_seqlen":
            assert any("BLOCK_N" in o.message and "seq_lens" in o.message for o in found), found
        return
    (kernel,) = _kernels(mod)
    report = verify_kernel(kernel, config=mod.CONFIGS[0])
    assert report.status in ("failed", "unsupported"), str(report)
    failure = report.failure
    assert failure.name == mod.EXPECT, str(report)
    lines, start = inspect.getsourcelines(_python_fn(kernel))
    assert start <= failure.line < start + len(lines), f"line {failure.line} is outside the kernel: {report}"
    if bug is not None:
        assert failure.line == bug, f"named line {failure.line}, the defect is at line {bug}: {report}"
    assert failure.message


def test_new_mutants_each_mark_their_line():
    marked = [p.stem for p in NEGATIVE if _bug_line(p) is not None]
    assert len(marked) >= 20, marked


@pytest.mark.parametrize("path", POSITIVE, ids=lambda p: p.stem)
def test_correct_kernel_is_proved(path):
    mod = _load(path)
    for kernel in _kernels(mod):
        report = verify_kernel(kernel, config=mod.CONFIGS[0])
        assert report.status == "proved", str(report)
        want = getattr(mod, "OBLIGATIONS", {"coverage", "read-equal-region", "loop-invariant"})
        assert {o.name for o in report.obligations} >= want, {o.name for o in report.obligations}


@pytest.mark.parametrize("path", POSITIVE, ids=lambda p: p.stem)
def test_correct_wrappers_pass_the_launch_check(path):
    mod = _load(path)
    assert obligations(check_module(path, module=mod)) == []


def test_a_verdict_does_not_depend_on_earlier_proofs_in_the_process(monkeypatch):
    """Each goal is checked in a Z3 context of its own, with fresh-constant names restarted: proving the
    persistent-matmul control (a hard non-linear coverage query, once rejected after other proofs in the
    same process) again after the rest of the corpus sends Z3 the very same queries, term ids included
    (Z3's search order follows them), and the caller's Z3 context is the default one again afterwards."""
    import z3

    from vosti_plugin.verifier import smt

    sent: list = []
    ask = smt.Prover._ask

    def recording(self, solver, formulas):
        sent.append(tuple((f.get_id(), f.sexpr()) for f in formulas))
        return ask(self, solver, formulas)

    monkeypatch.setattr(smt.Prover, "_ask", recording)
    mod = _load(CORPUS / "good_persistent_matmul.py")

    def prove() -> tuple[list, list]:
        sent.clear()
        statuses = [verify_kernel(k, config=mod.CONFIGS[0]).status for k in _kernels(mod)]
        return statuses, list(sent)

    outer = z3.main_ctx()
    first = prove()
    for path in NEGATIVE[:10] + POSITIVE:  # the -inf masking control among them
        other = _load(path)
        for kernel in _kernels(other):
            verify_kernel(kernel, config=getattr(other, "CONFIGS", [{}])[0])
    again = prove()
    assert first[0] == again[0] == ["proved"]
    assert first[1] and again[1] == first[1]
    assert z3.main_ctx() is outer


def test_proofs_from_two_threads_give_the_reports_of_serial_ones():
    """The Z3 context swapped in per goal is process-wide, so goals from two threads take turns."""
    from concurrent.futures import ThreadPoolExecutor

    picks = [CORPUS / "good_persistent_matmul.py", CORPUS / "good_inf_arithmetic_mask.py",
             CORPUS / "bad_int32_row_offset.py", CORPUS / "good_prefix_rowsum.py"]
    mods = [_load(p) for p in picks]

    def reports(mod):
        return [(r.status, [(o.name, o.line, o.status) for o in r.obligations])
                for r in (verify_kernel(k, config=mod.CONFIGS[0]) for k in _kernels(mod))]

    serial = [reports(m) for m in mods]
    with ThreadPoolExecutor(2) as pool:
        threaded = list(pool.map(reports, mods + mods))
    assert threaded == serial + serial
