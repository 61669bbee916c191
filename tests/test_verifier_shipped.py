"""The shipped kernels prove their contracts: dense ops are row invariant, the KV write kernel writes only
its slots, paged attention is invariant to batch, chunking, prefill/decode and page tables; a verified
catalog re-check is served from the cache in under a second."""
import time

import pytest
from hypothesis import given, settings, strategies as st

from vosti_plugin.attention import kv_write, paged_attention
from vosti_plugin.ops import activation, matmul, rmsnorm, softmax
from vosti_plugin.verifier.api import results_json, results_table, verify_catalog, verify_kernel
from vosti_plugin.verifier.contracts import contract_of


def _entry(entries, name):
    return next(e for e in entries if e["kernel"].fn.__name__ == name)


@pytest.mark.parametrize("name", ["mm_kernel", "mm_splitk_partial_kernel", "splitk_combine_kernel",
                                  "rms_norm_kernel", "norm_add_rms_norm_kernel", "softmax_kernel", "mean_kernel"])
def test_dense_op_rows_do_not_depend_on_the_batch(name):
    entry = _entry(matmul.verifier_catalog() + rmsnorm.verifier_catalog() + softmax.verifier_catalog(), name)
    assert entry["configs"], f"{name} has no catalog configs"
    for config, _family in entry["configs"][:4]:
        report = verify_kernel(entry["kernel"], config=config)
        assert report.status == "proved", str(report)


def test_kv_write_touches_only_its_slots_and_copies_bits():
    entry = kv_write.verifier_catalog()[0]
    config, _ = entry["configs"][0]
    for goal in contract_of(entry["kernel"]).verif:
        report = verify_kernel(entry["kernel"], config=config, goal=goal.name)
        assert report.status == "proved", str(report)


def test_attention_row_equals_across_batch_chunking_decode_and_pages():
    entry = paged_attention.verifier_catalog()[0]
    config = next(c for c, _ in entry["configs"]
                  if c["QUERIES_PER_KV"] == 4 and not c["USE_WINDOW"] and not c["USE_SOFT_CAP"])
    report = verify_kernel(entry["kernel"], config=config)
    assert report.status == "proved", str(report)
    names = {o.name for o in report.obligations}
    assert {"count-scan", "coverage", "write-race", "read-equal-region", "loop-invariant", "masked-noop"} <= names


@settings(max_examples=4)
@given(bm=st.sampled_from([16, 32, 64]), bn=st.sampled_from([32, 64, 128]), bk=st.sampled_from([16, 32, 64]),
       bias=st.booleans())
def test_matmul_row_invariance_holds_for_any_block_shape(bm, bn, bk, bias):
    entry = _entry(matmul.verifier_catalog(), "mm_kernel")
    config = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "HAS_BIAS": bias, "DOT_PRECISION": "ieee"}
    assert verify_kernel(entry["kernel"], config=config).status == "proved"


def test_cached_catalog_recheck_is_fast(tmp_path):
    first = verify_catalog(kernel="rms_norm_kernel", cache_dir=tmp_path, workers=1)
    assert first and all(r.status == "proved" for r in first)
    t0 = time.perf_counter()
    again = verify_catalog(kernel="rms_norm_kernel", cache_dir=tmp_path, workers=1)
    assert time.perf_counter() - t0 < 1.0
    assert all(r.cached for r in again) and len(again) == len(first)
    doc = results_json(again)
    assert doc["all_proved"] and doc["counts"] == {"proved": len(again)}
    assert results_table(again).row_count == len(again)


def test_split_kv_combine_row_depends_only_on_its_segments():
    entry = _entry(paged_attention.verifier_catalog(), "_combine_segments_kernel")
    for config, _ in entry["configs"][:2]:
        report = verify_kernel(entry["kernel"], config=config)
        assert report.status == "proved", str(report)
        assert "count-scan" in {o.name for o in report.obligations}


def test_attention_without_the_masked_tile_guard_is_rejected():
    """Mutation of the shipped kernel: fold every tile into the state, even tiles holding no key of the
    row (the guard `where(tile_live, new, old)` removed) -> the verifier names the broken obligation."""
    import inspect

    from vosti_plugin.verifier.check import check_goal
    from vosti_plugin.verifier.frontend import kernel_from_source

    entry = paged_attention.verifier_catalog()[0]
    kernel, spec = entry["kernel"], contract_of(entry["kernel"])
    lines, start = inspect.getsourcelines(kernel.fn)
    source = "".join(lines)
    mutated = (source.replace("m_i = tl.where(tile_live, m_new, m_i)", "m_i = m_new")
               .replace("l_i = tl.where(tile_live, l_new, l_i)", "l_i = l_new")
               .replace("acc = tl.where(tile_live[:, None], acc_new, acc)", "acc = acc_new"))
    assert mutated != source, "the guard lines changed; update this mutation"
    ir_kernel = kernel_from_source(mutated, name=kernel.fn.__name__, first_line=start,
                                   filename=inspect.getsourcefile(kernel.fn), globals_=kernel.fn.__globals__)
    config = next(c for c, _ in entry["configs"]
                  if c["FUSED"] and c["QUERIES_PER_KV"] == 4 and not c["USE_WINDOW"] and not c["USE_SOFT_CAP"])
    report = check_goal(ir_kernel, spec, spec.verif[0], config)
    assert report.status == "failed"
    assert report.failure.name in ("masked-noop", "loop-range"), str(report)
    helper_lines, helper_start = inspect.getsourcelines(paged_attention._online_softmax_step.fn)
    assert (start <= report.failure.line < start + len(lines)
            or helper_start <= report.failure.line < helper_start + len(helper_lines)), str(report)


def test_every_catalog_kernel_carries_its_contract_right_above_its_jit():
    """Contracts are written next to the kernels: the `@contract(...)` decorator opens the kernel's source."""
    import inspect

    from vosti_plugin.verifier.api import catalog_entries

    entries = catalog_entries()
    assert {e["kernel"].fn.__name__ for e in entries} >= {
        "mm_kernel", "mm_splitk_partial_kernel", "splitk_combine_kernel", "rms_norm_kernel",
        "norm_add_rms_norm_kernel", "softmax_kernel", "mean_kernel", "act_and_mul_kernel", "_paged_attention_segments_kernel", "_combine_segments_kernel",
        "_write_kv_kernel"}
    for e in entries:
        kernel = e["kernel"]
        lines, _ = inspect.getsourcelines(kernel.fn)
        assert lines[0].startswith("@contract("), f"{kernel.fn.__name__}: no @contract above its @triton.jit"
        assert contract_of(kernel) is not None and contract_of(kernel).verif


def test_act_and_mul_reading_another_row_is_rejected():
    import inspect

    from vosti_plugin.verifier.check import check_goal
    from vosti_plugin.verifier.frontend import kernel_from_source
    from vosti_plugin.ops import activation

    kernel = activation.act_and_mul_kernel
    lines, start = inspect.getsourcelines(kernel.fn)
    source = "".join(lines)
    mutated = source.replace("b = tl.load(x_ptr + row * stride_x + D + cols",
                             "b = tl.load(x_ptr + (row + 1) * stride_x + D + cols")
    assert mutated != source, "the gate load changed; update this mutation"
    spec = contract_of(kernel)
    config = {"ACT": activation.SILU, "BLOCK": activation.BLOCK}
    assert check_goal(kernel_from_source(source, name="act_and_mul_kernel", first_line=start,
                                         globals_=kernel.fn.__globals__), spec, spec.verif[0], config).status == "proved"
    report = check_goal(kernel_from_source(mutated, name="act_and_mul_kernel", first_line=start,
                                           globals_=kernel.fn.__globals__), spec, spec.verif[0], config)
    assert report.status == "failed" and report.failure.name == "read-equal-region", str(report)


def test_cold_catalog_time_is_reported(tmp_path):
    """`python -m vosti_plugin.verifier.bench` verifies into an empty cache and prints the cold and cached times (the
    whole-catalog number is a benchmark, not a timed test: here one small kernel keeps the test short)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    out_json = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "vosti_plugin.verifier.bench", "--kernel", "mean_kernel", "--workers", "1",
                           "--json", str(out_json)], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cold catalog verification:" in proc.stdout and "groups" in proc.stdout
    numbers = json.loads(out_json.read_text())
    assert numbers["statuses"] == {"proved": numbers["results"]} and numbers["results"] >= 5
    assert numbers["groups"] >= 1 and numbers["cold_seconds"] > 0 and numbers["cached_all"]


def test_bench_sample_times_each_group_without_the_cache(tmp_path):
    """`--sample N` proves the first N groups of a kernel one by one and prints each one's seconds; it neither
    reads nor writes proofs (an empty cache directory gets none), so the time is a cold proof's."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    cache = tmp_path / "cache"
    cache.mkdir()
    proc = subprocess.run([sys.executable, "-m", "vosti_plugin.verifier.bench", "--kernel", "mean_kernel", "--sample", "1"],
                          capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parent.parent,
                          env={**os.environ, "VOSTI_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("mean_kernel")]
    assert len(lines) == 1 and ": proved," in lines[0] and lines[0].endswith(" s"), proc.stdout
    assert not [p for p in cache.rglob("*.json") if p.name != "fingerprint-memo.json"]
    bad = subprocess.run([sys.executable, "-m", "vosti_plugin.verifier.bench", "--kernel", "no_such_kernel", "--sample", "1"],
                         capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert bad.returncode == 2 and "no catalog kernel matches" in bad.stderr


def test_kv_write_store_without_head_mask_is_rejected_for_some_catalog_block():
    """BLOCK_H is symbolic (one proof for every catalog value): dropping the head mask of the K store lets
    lanes past num_kv_heads write outside the token's slot, and the write frame names it."""
    import inspect

    from vosti_plugin.verifier.check import check_goal
    from vosti_plugin.verifier.frontend import kernel_from_source
    from vosti_plugin.attention import kv_write

    kernel = kv_write._write_kv_kernel
    lines, start = inspect.getsourcelines(kernel.fn)
    source = "".join(lines)
    mutated = source.replace("key.to(k_cache_ptr.dtype.element_ty), mask=mask)", "key.to(k_cache_ptr.dtype.element_ty))")
    assert mutated != source, "the K store changed; update this mutation"
    spec = contract_of(kernel)
    assert "BLOCK_H" in spec.symbolic
    domain = [{"HEAD_DIM": d, "HEAD_DIM_PAD": d, "PAGE_SIZE": p, "BLOCK_H": h}
              for d in (64, 128) for p in (16, 32) for h in (1, 8, 32)]
    frame = next(g for g in spec.verif if g.name == "writes_only_its_slots")
    ir_kernel = kernel_from_source(mutated, name=kernel.fn.__name__, first_line=start, globals_=kernel.fn.__globals__)
    report = check_goal(ir_kernel, spec, frame, dict(domain[0]), domain=domain)
    assert report.status == "failed" and report.failure.name == "write-frame", str(report)
    assert start <= report.failure.line < start + len(lines)
