"""The CPU path is batch-invariant on any host, and the `host-numerics` self-test refuses a host that is not.

Triton's interpreter computed `tl.dot` with the host BLAS; OpenBLAS's Haswell kernel (picked on AMD EPYC,
forced anywhere on x86 with OPENBLAS_CORETYPE=Haswell) gives a row other bits at other lanes of a tile.
The subprocess tests force that kernel, so they fail on any x86 host without vosti's interpreter numerics.
"""
import json
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from vosti_plugin import interpreter_numerics
from vosti_plugin.launch import host_numerics
from vosti_plugin.launch.facts import LaunchFacts

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ON_X86 = platform.machine() in ("x86_64", "AMD64")


def tiny_facts(**overrides) -> LaunchFacts:
    from vosti_plugin.integration.tiny_model import GEOMETRY as G

    base = dict(model="tiny", architecture="LlamaForCausalLM", dtype="float32", head_size=G["head_dim"],
                num_q_heads=G["num_attention_heads"], num_kv_heads=G["num_key_value_heads"],
                num_layers=G["num_hidden_layers"], hidden_size=G["hidden_size"],
                intermediate_size=G["intermediate_size"], vocab_size=G["vocab_size"], sliding_window=None,
                page_size=64, max_model_len=4096, max_num_batched_tokens=2048, max_num_seqs=16,
                num_gpu_blocks=None, platform="cpu")
    return LaunchFacts(**{**base, **overrides})


def _run(code: str, **env) -> dict:
    """Run `code` in a fresh interpreter (so OPENBLAS_CORETYPE takes effect) and return its JSON line."""
    full_env = {**os.environ, "TRITON_INTERPRET": "1", **env}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_RAW_BLAS_LANES = """
    import numpy as np
    rng = np.random.default_rng(0)
    B = rng.standard_normal((64, 128), dtype=np.float32); A = rng.standard_normal((32, 64), dtype=np.float32)
    raw_dependent = sum(not np.array_equal(np.roll(np.roll(A, s, 0) @ B, -s, 0), A @ B) for s in range(1, 32))
"""

_LANE_SWEEP = _RAW_BLAS_LANES + """
    import json, torch
    from vosti_plugin.ops import matmul
    from vosti_plugin.attention.config import AttentionLaunchConfig
    from vosti_plugin.attention.paged_batch import build_paged_batch, random_request, run_paged_batch
    from vosti_plugin.attention.kv_write import write_kv
    torch.manual_seed(0)
    K, N = 192, 160
    w = torch.randn(N, K) / K ** 0.5
    row = torch.randn(1, K)
    alone = matmul.linear(row, w)
    mm_bad = mm_total = 0
    for M in (2, 3, 7, 31, 32, 33, 64):
        for lane in range(M):
            a = torch.randn(M, K); a[lane] = row[0]
            mm_total += 1
            mm_bad += not torch.equal(matmul.linear(a, w)[lane], alone[0])
    cfg = AttentionLaunchConfig(block_q=8, block_m=16, block_n=16, segment=32, num_warps=4, num_stages=1)
    target = random_request(45, 4, 4, 2, 32, seed=1)
    ref = run_paged_batch(build_paged_batch([target], page_size=16, seed=0, fused_kv=True), cfg, scale=0.2)[0]
    att_bad = att_total = 0
    for lead in range(0, 16):
        others = [random_request(lead + 3, lead, 4, 2, 32, seed=10 + lead)] if lead else []
        batch = build_paged_batch(others + [target], page_size=16, seed=lead, fused_kv=True, padding_rows=3)
        for path in ("split", "fused"):
            att_total += 1
            got = run_paged_batch(batch, cfg, scale=0.2, path=path)[len(others)]
            att_bad += not torch.equal(got, ref)
    print(json.dumps({"raw_dependent": int(raw_dependent), "mm_bad": int(mm_bad), "mm_total": mm_total,
                      "att_bad": int(att_bad), "att_total": att_total}))
"""


@pytest.mark.skipif(not ON_X86, reason="OPENBLAS_CORETYPE=Haswell selects an x86 BLAS kernel")
def test_row_has_same_bits_at_every_lane_with_a_lane_dependent_blas():
    got = _run(_LANE_SWEEP, OPENBLAS_CORETYPE="Haswell")
    print(f"raw np.matmul lane-dependent shifts: {got['raw_dependent']}/31; vosti linear rows differing: "
          f"{got['mm_bad']}/{got['mm_total']}; attention rows differing: {got['att_bad']}/{got['att_total']}")
    assert got["mm_bad"] == 0 and got["att_bad"] == 0
    # The host really misbehaves here (else this test would prove nothing about it).
    assert got["raw_dependent"] > 0


@pytest.mark.skipif(not ON_X86, reason="OPENBLAS_CORETYPE=Haswell selects an x86 BLAS kernel")
def test_self_test_refuses_the_host_blas_without_vosti_numerics():
    code = _RAW_BLAS_LANES + """
    import json
    from vosti_plugin import interpreter_numerics
    import vosti_plugin.ops.matmul
    from tests.test_host_numerics import tiny_facts
    from vosti_plugin.launch import host_numerics
    interpreter_numerics.undo()
    result = host_numerics.run_self_test(tiny_facts())
    print(json.dumps({"raw_dependent": int(raw_dependent), **result.to_dict()}))
    """
    got = _run(code, OPENBLAS_CORETYPE="Haswell", PYTHONPATH=os.getcwd())
    print(got)
    assert got["raw_dependent"] > 0
    assert not got["passed"] and any(name.startswith("matmul/") for name in got["failed"])


def test_self_test_passes_here_and_is_cached_per_process():
    host_numerics.clear_cache()
    facts = tiny_facts()
    first = host_numerics.run_self_test(facts)
    print(f"host-numerics on CPU (tiny model): {len(first.probes)} probes, {first.seconds:.2f} s")
    assert first.ok, host_numerics.describe_failure(first)
    names = {p.name.split(" ")[0] for p in first.probes}
    assert {"rms_norm", "fused_add_rms_norm", "act_and_mul", "log_softmax", "paged_attention/split",
            "paged_attention/fused"} <= names
    assert any(n.startswith("matmul/") for n in names)
    assert host_numerics.run_self_test(facts) is first


def _wrap_dot(monkeypatch, wrap) -> None:
    """Replace the interpreter's dot by wrap(vosti's dot). vosti's numerics go in first: a kernel module imported
    later would install them over the wrapper, and the monkeypatch would then restore the host's raw dot."""
    from triton.runtime import interpreter

    interpreter_numerics.install()
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", wrap(interpreter.InterpreterBuilder.create_dot))


def _lane_dependent_dot(original):
    """A dot whose row 1 of every tile is one ulp off: what a lane-dependent BLAS does to a GEMM."""
    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        out = original(self, a, b, d, input_precision, max_num_imprecise_acc)
        if out.data.ndim == 2 and out.data.shape[0] > 1:
            out.data[1] = np.nextafter(out.data[1], np.inf, dtype=out.data.dtype)
        return out

    return dot


def test_self_test_refuses_a_lane_dependent_dot(monkeypatch):
    from vosti_plugin.launch.obligations import LaunchRefused

    _wrap_dot(monkeypatch, _lane_dependent_dot)
    host_numerics.clear_cache()
    try:
        result = host_numerics.run_self_test(tiny_facts())
        failed = {p.name for p in result.probes if not p.ok}
        message = host_numerics.describe_failure(result)
        print(message)
        assert not result.ok
        assert any(n.startswith("matmul/") for n in failed) and any(n.startswith("paged_attention") for n in failed)
        assert "rms_norm" not in failed           # no dot in it: the probes name what broke
        with pytest.raises(LaunchRefused, match=r"\[host-numerics\]"):
            raise LaunchRefused([host_numerics.failure_of(result)])
    finally:
        host_numerics.clear_cache()


def _tile_height_dependent_dot(original, rows: int):
    """A dot whose every element is one ulp off in tiles of at least `rows` rows: a dot row that depends on the
    tile shape, which the cross-tile proofs trust it not to."""
    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        out = original(self, a, b, d, input_precision, max_num_imprecise_acc)
        if out.data.ndim == 2 and out.data.shape[0] >= rows:
            out.data[...] = np.nextafter(out.data, np.inf, dtype=out.data.dtype)
        return out

    return dot


def assert_only_probe_refuses_under_tile_height_dot(monkeypatch, facts, rows: int, probe: str | set[str], fix: str):
    """With a dot whose rows change in tiles of `rows`+ rows, the startup probes fail exactly `probe` (one name or
    a set of them), and the refusal's fix names `fix`."""
    _wrap_dot(monkeypatch, lambda dot: _tile_height_dependent_dot(dot, rows))
    host_numerics.clear_cache()
    broken = host_numerics.run_self_test(facts)
    print(host_numerics.describe_failure(broken))
    assert {p.name for p in broken.probes if not p.ok} == ({probe} if isinstance(probe, str) else probe)
    assert fix in host_numerics.failure_of(broken).fix


def test_tall_rows_are_checked_against_the_decode_row(monkeypatch):
    """With the tall path on, a prefill-sized launch's rows must carry the bits of the same row decoded alone;
    a dot that changes with the tile height fails exactly those probes."""
    from vosti_plugin.ops import matmul

    monkeypatch.setenv("VOSTI_TALL_GEMM", "1")
    host_numerics.clear_cache()
    try:
        result = host_numerics.run_self_test(tiny_facts())
        tall = [p for p in result.probes if "/tall vs decode" in p.name]
        assert result.ok and tall, host_numerics.describe_failure(result)

        tall_rows = matmul.tall_config(matmul.select_config(64, 64, torch.float32), torch.float32).block_m
        _wrap_dot(monkeypatch, lambda dot: _tile_height_dependent_dot(dot, tall_rows))
        host_numerics.clear_cache()
        result = host_numerics.run_self_test(tiny_facts())
        failed = {p.name for p in result.probes if not p.ok}
        print(host_numerics.describe_failure(result))
        assert failed == {p.name for p in tall}
        assert "VOSTI_TALL_GEMM=0" in host_numerics.failure_of(result).fix
    finally:
        host_numerics.clear_cache()


def test_undo_restores_the_interpreter_exactly():
    from triton.runtime import interpreter

    assert interpreter_numerics.installed()
    patched = {p.attribute: getattr(getattr(interpreter, p.owner), p.attribute) for p in interpreter_numerics.PATCHES}
    interpreter_numerics.undo()
    try:
        for p in interpreter_numerics.PATCHES:
            now = getattr(interpreter, p.owner).__dict__[p.attribute]
            assert now is not patched[p.attribute]
            assert getattr(now, "__module__", "").startswith("triton"), (p, now)
    finally:
        interpreter_numerics.install()
    assert interpreter.InterpreterBuilder.create_dot is patched["create_dot"]


shapes = st.tuples(st.integers(1, 40), st.integers(1, 70), st.integers(1, 24))


@given(shape=shapes, lane=st.integers(0, 39), seed=st.integers(0, 2**16), transposed=st.booleans())
def test_fixed_order_matmul_row_depends_only_on_its_inputs(shape, lane, seed, transposed):
    M, K, N = shape
    lane %= M
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    if transposed:
        b = np.ascontiguousarray(b.T).T            # the layout vLLM's weights have
    batch = interpreter_numerics.fixed_order_matmul(a, b, np.float32)
    alone = interpreter_numerics.fixed_order_matmul(a[lane:lane + 1], b, np.float32)
    assert batch[lane].tobytes() == alone[0].tobytes()
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = 2 * K * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert np.all(np.abs(batch - exact) <= bound + 1e-30)


@given(rows=st.integers(1, 9), n=st.integers(1, 300), seed=st.integers(0, 2**16))
def test_tree_sum_and_max_of_a_row_ignore_its_neighbours(rows, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, n)).astype(np.float32)
    x[rng.random((rows, n)) < 0.1] = -0.0
    for combine in (np.add, np.fmax, np.fmin):
        for layout in (x, np.asfortranarray(x)):
            together = interpreter_numerics.tree_reduce(layout, 1, combine)
            for r in range(rows):
                alone = interpreter_numerics.tree_reduce(x[r:r + 1], 1, combine)
                assert together[r].tobytes() == alone[0].tobytes()


@pytest.mark.vllm
def test_engine_runs_the_self_test_and_certifies_it(tiny_model_path, tmp_path):
    from vllm import SamplingParams

    from vosti_plugin.integration.engine_presets import build_llm

    host_numerics.clear_cache()
    cert_path = tmp_path / "cert.json"
    llm = build_llm(tiny_model_path, skip_tokenizer_init=True,
                    additional_config={"vosti": {"certificate": str(cert_path)}})
    try:
        cert = json.loads(cert_path.read_text())
        record = cert["host-numerics"]
        print(f"certificate host-numerics: {record}")
        assert record["passed"] and record["probes"] >= 8 and record["device"] == "cpu"
        out = llm.generate([{"prompt_token_ids": [5, 6, 7]}], SamplingParams(max_tokens=2), use_tqdm=False)
        assert len(out[0].outputs[0].token_ids) == 2
    finally:
        del llm


def test_every_fix_names_a_command_that_exists():
    """A refusal's fix tells the user to run a module: that module must be there to run."""
    import importlib.util
    import re

    from vosti_plugin.launch import host_numerics

    fixes = list(host_numerics.FIX.values()) + [host_numerics.TALL_FIX, host_numerics.DECODE_TILES_FIX]
    modules = {m for fix in fixes for m in re.findall(r"python -m ([\w.]+)", fix)}
    assert modules, "the fixes name no command to run"
    for module in modules:
        assert importlib.util.find_spec(module) is not None, f"a fix names `python -m {module}`, which is not there"


def test_mid_rows_are_checked_against_the_decode_row(monkeypatch):
    """With the mid tiles on (the default), a 64-row tile's rows must carry the bits of the same row decoded alone; a dot that
    changes with the tile height fails exactly those probes, and the refusal's fix turns the switch off."""
    from vosti_plugin.ops import matmul

    monkeypatch.delenv("VOSTI_MID_GEMM", raising=False)
    host_numerics.clear_cache()
    try:
        result = host_numerics.run_self_test(tiny_facts())
        mid = {p.name for p in result.probes if "/mid vs decode" in p.name}
        assert result.ok and mid, host_numerics.describe_failure(result)
        rows = matmul.mid_config(matmul.select_config(64, 64, torch.float32)).block_m
        assert_only_probe_refuses_under_tile_height_dot(monkeypatch, tiny_facts(), rows, mid, "set VOSTI_MID_GEMM=0")
    finally:
        host_numerics.clear_cache()


@pytest.mark.parametrize("failed, fix", [
    (("matmul/mlp.gate_up_proj/tall column walk vs decode (K=64)",), "VOSTI_TMA_COLS_GEMM=0"),
    (("matmul/mlp.gate_up_proj/tall vs decode (K=64)",), "VOSTI_TALL_GEMM=0"),
    (("matmul/mlp.gate_up_proj/tall column walk vs decode (K=64)", "matmul/qkv_proj/tall vs decode (K=64)"),
     "host_numerics_check"),
])
def test_a_refusal_of_tall_probes_alone_names_their_switch(failed, fix):
    """Probes of one tall path failing alone turn that path off; failures of both paths are the card's own."""
    probes = tuple(host_numerics.ProbeResult(name, ("1 of 2 placements differ",)) for name in failed)
    result = host_numerics.HostNumericsResult("cuda", "bfloat16", 0.1,
                                              probes + (host_numerics.ProbeResult("rms_norm"),))
    failure = host_numerics.failure_of(result)
    assert fix in failure.fix and failed[0] in failure.reason
