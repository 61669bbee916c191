"""Batch-invariant matmul (mm / addmm / linear): row invariance in M and agreement with fp64.

CPU runs the kernels through the Triton interpreter in fp32 (see conftest)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vosti_plugin.ops import matmul

# (N, K) of the tiny CPU model (hidden 128, intermediate 344, vocab 512) plus awkward sizes.
TINY_SHAPES = [(384, 128), (128, 128), (688, 128), (128, 344), (512, 128)]
ODD_SHAPES = [(1, 1), (3, 17), (130, 65), (257, 300)]
# Explicit configs that exercise the split-K path (partials + ordered combine) on CPU.
SPLIT_CONFIGS = [
    matmul.MatmulConfig(block_m=16, block_n=32, block_k=32, split_k=3, num_stages=1),
    matmul.MatmulConfig(block_m=32, block_n=64, block_k=16, split_k=4, num_stages=1),
]

row_counts = st.one_of(st.integers(1, 16), st.integers(17, 512), st.sampled_from([1, 2, 31, 32, 33, 64, 511, 512]))


def _operands(seed: int, M: int, N: int, K: int, with_bias: bool):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g)
    w = torch.randn(N, K, generator=g) / K**0.5
    bias = torch.randn(N, generator=g) if with_bias else None
    return a, w, bias


def _run(op: str, a, w, bias, config):
    if config is not None:
        out = torch.empty(a.shape[0], w.shape[0])
        return matmul.launch_matmul(a, w.t(), bias if op != "mm" else None, out, config)
    if op == "mm":
        return matmul.mm(a, w.t())
    if op == "addmm":
        return matmul.addmm(bias, a, w.t())
    return matmul.linear(a, w, bias)


def _assert_rows_equal_single_row_products(op, a, w, bias, config, rows):
    full = _run(op, a, w, bias, config)
    for x in rows:
        single = _run(op, a[x : x + 1].clone(), w, bias, config)
        assert torch.equal(full[x].view(torch.int32), single[0].view(torch.int32)), f"row {x} of M={a.shape[0]}"


@settings(max_examples=12)
@given(
    op=st.sampled_from(["mm", "addmm", "linear"]),
    M=row_counts,
    shape=st.sampled_from(TINY_SHAPES + ODD_SHAPES),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_matmul_row_equals_single_row_product(op, M, shape, seed, data):
    N, K = shape
    a, w, bias = _operands(seed, M, N, K, with_bias=True)
    rows = data.draw(st.lists(st.integers(0, M - 1), min_size=1, max_size=3, unique=True))
    _assert_rows_equal_single_row_products(op, a, w, bias, None, sorted({0, M - 1, *rows}))


@settings(max_examples=8)
@given(
    op=st.sampled_from(["mm", "addmm"]),
    M=row_counts,
    config=st.sampled_from(SPLIT_CONFIGS),
    shape=st.sampled_from([(128, 344), (96, 200), (33, 129)]),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_split_k_row_equals_single_row_product(op, M, config, shape, seed, data):
    N, K = shape
    a, w, bias = _operands(seed, M, N, K, with_bias=True)
    rows = data.draw(st.lists(st.integers(0, M - 1), min_size=1, max_size=3, unique=True))
    _assert_rows_equal_single_row_products(op, a, w, bias, config, sorted({0, M - 1, *rows}))


@settings(max_examples=6)
@given(M=st.integers(2, 200), shape=st.sampled_from(TINY_SHAPES), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_row_is_independent_of_its_neighbours(M, shape, seed, data):
    """The same row placed at another index among other rows gives the same bits."""
    N, K = shape
    a, w, bias = _operands(seed, M, N, K, with_bias=True)
    x = data.draw(st.integers(0, M - 1))
    y = data.draw(st.integers(0, M - 1))
    other = torch.randn(M, K, generator=torch.Generator().manual_seed(seed + 1))
    other[y] = a[x]
    assert torch.equal(matmul.linear(a, w, bias)[x], matmul.linear(other, w, bias)[y])


def _error_bound(a64, b64, K):
    # fp32 dot products of length K: |c - c_exact| <= gamma_K * (|a| @ |b|), gamma_K ~ K * 2^-24.
    # We allow 2 * K * 2^-24 (+ 1 ulp of the result for the final rounding of bias add/cast).
    return 2 * K * 2.0**-24 * (a64.abs() @ b64.abs()) + 2.0**-23 * (a64 @ b64).abs() + 1e-30


@pytest.mark.parametrize("config", [None, *SPLIT_CONFIGS])
@pytest.mark.parametrize("shape", TINY_SHAPES + ODD_SHAPES)
def test_matmul_matches_fp64_reference(shape, config):
    N, K = shape
    M = 67
    a, w, bias = _operands(7, M, N, K, with_bias=True)
    got = _run("addmm", a, w, bias, config).double()
    ref = a.double() @ w.double().t() + bias.double()
    bound = _error_bound(a.double(), w.double().t(), K) + 2.0**-23 * bias.double().abs()
    assert ((got - ref).abs() <= bound).all(), f"max err {(got - ref).abs().max().item():.3e}"


def test_16bit_inputs_widen_exactly_on_cpu():
    """bf16 operands go through the fp32 interpreter path: equal to the fp32 product of the widened
    values, rounded once to bf16."""
    a, w, _ = _operands(3, 40, 128, 128, with_bias=False)
    a16, w16 = a.bfloat16(), w.bfloat16()
    got = matmul.linear(a16, w16)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, matmul.linear(a16.float(), w16.float()).bfloat16())


def test_config_never_depends_on_m_and_catalog_is_enumerable():
    assert matmul.CATALOG, "catalog must list the supported model GEMMs"
    for (N, K, dtype_name), config in matmul.CATALOG.items():
        assert matmul.select_config(N, K, getattr(torch, dtype_name)) == config
        assert config.split_k >= 1 and config.k_per_split(K) % config.block_k == 0
        assert (config.split_k - 1) * config.k_per_split(K) < K, "every split must own some K"
    # decode GEMMs of Llama-3.1-8B with few column tiles split K; lm_head does not
    assert matmul.select_config(4096, 4096, torch.bfloat16).split_k > 1
    assert matmul.select_config(128256, 4096, torch.bfloat16).split_k == 1


@pytest.mark.parametrize("rows", ["16", "64"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_gpu_rule_reaches_only_configs_the_verifier_is_given(dtype, rows, monkeypatch):
    monkeypatch.setenv("VOSTI_DECODE_GEMM_ROWS", rows)
    proved = set(matmul.rule_configs())
    shapes = [(N, K) for N in (64, 896, 1152, 2048, 2560, 4096, 4160, 6144, 8192, 8256, 28672, 262208)
              for K in (64, 896, 1024, 2048, 3072, 4032, 4096, 6912, 14336, 28672)]
    missing = [(N, K) for N, K in shapes if (matmul.rule_config(N, K, dtype), dtype) not in proved]
    assert not missing, f"rule configs outside rule_configs(): {missing}"


def test_wide_shapes_with_enough_column_tiles_do_not_split(monkeypatch):
    """From 176 column tiles the 16-row rule leaves K unsplit (a split's K order also holds every prefill row
    of the shape on the tall path's two-accumulator tiles); below it, splits fill the programs as before."""
    monkeypatch.delenv("VOSTI_DECODE_GEMM_ROWS", raising=False)
    llama_qkv = matmul.select_config(6144, 4096, torch.bfloat16)
    assert (llama_qkv.block_n, llama_qkv.split_k) == (32, 1)
    assert matmul.rule_config(5632, 4096, torch.bfloat16).split_k == 1      # 176 tiles
    assert matmul.rule_config(5600, 4096, torch.bfloat16).split_k == 2      # 175 tiles
    assert matmul.rule_config(5120, 5120, torch.bfloat16).split_k == 2      # 160 tiles: Qwen-14B o
    assert matmul.rule_config(4096, 14336, torch.bfloat16).split_k == 2     # Llama down
    assert matmul.rule_config(6144, 4096, torch.bfloat16, rows=64).split_k == 2   # the 64-row rule as it was
    _, launch = matmul.launch_path(2048, llama_qkv, torch.bfloat16)
    assert matmul.tma_cols_path(6144, launch, torch.bfloat16) is not None   # its prefill chunks walk columns


def test_small_weights_take_one_launch_with_enough_column_tiles():
    """A small weight's GEMM is latency-bound: one launch (no split-K combine) unless K is at least twice N,
    with the widest column tile that still gives 72 programs."""
    for N, K in [(896, 896), (1152, 1024), (1536, 1152), (2560, 2048), (4096, 2560), (6144, 2048)]:
        cfg = matmul.rule_config(N, K, torch.bfloat16)
        assert cfg.split_k == 1, (N, K, cfg)
        assert -(-N // cfg.block_n) >= 72 or cfg.block_n == 16, (N, K, cfg)
        assert cfg.block_n == 64 or -(-N // (2 * cfg.block_n)) < 72, f"a wider tile gives enough programs: {N, K}"
    assert matmul.rule_config(1024, 3072, torch.bfloat16).split_k > 1   # K >= 2N: split
    assert matmul.rule_config(4096, 4096, torch.bfloat16).block_m == 16  # K 4096: the wide-shape rule (16-row tiles)


def test_a_different_reduction_order_is_visible_in_the_bits():
    """Guards the invariance tests against being vacuous: changing only the K order (block_k / split)
    must change some output bits, so an M-dependent config choice would be caught."""
    a, w, _ = _operands(11, 64, 128, 344, with_bias=False)
    base = matmul.MatmulConfig(block_m=32, block_n=128, block_k=64, split_k=1, num_stages=1)
    other = matmul.MatmulConfig(block_m=32, block_n=128, block_k=16, split_k=4, num_stages=1)
    c1 = matmul.launch_matmul(a, w.t(), None, torch.empty(64, 128), base)
    c2 = matmul.launch_matmul(a, w.t(), None, torch.empty(64, 128), other)
    assert not torch.equal(c1, c2)


def test_tall_split_k_gemm_in_row_chunks_gives_the_same_bits(monkeypatch):
    """Split-K bounds its fp32 workspace by running tall GEMMs in row chunks; rows must not notice."""
    a, w, bias = _operands(5, 150, 96, 200, with_bias=True)
    config = SPLIT_CONFIGS[0]
    whole = matmul.launch_matmul(a, w.t(), bias, torch.empty(150, 96), config)
    monkeypatch.setattr(matmul, "_SPLIT_WORKSPACE_ELEMS", config.split_k * 96 * 32)  # 32-row chunks
    chunked = matmul.launch_matmul(a, w.t(), bias, torch.empty(150, 96), config)
    assert torch.equal(whole, chunked)


def test_decode_gemm_rows_switch(monkeypatch):
    """16-row decode tiles by default; VOSTI_DECODE_GEMM_ROWS=64 gives back the 64-row rule (its configs are
    proved too, so the verifier's catalog does not depend on the switch); other values are refused by name."""
    monkeypatch.delenv("VOSTI_DECODE_GEMM_ROWS", raising=False)
    assert matmul.decode_gemm_rows() == 16
    default = matmul.select_config(4096, 4096, torch.bfloat16)
    assert (default.block_m, default.block_n, default.split_k) == (16, 32, 2)
    catalog_before = matmul.verifier_catalog()
    monkeypatch.setenv("VOSTI_DECODE_GEMM_ROWS", "64")
    legacy = matmul.select_config(4096, 4096, torch.bfloat16)
    assert (legacy.block_m, legacy.block_n, legacy.split_k) == (64, 64, 4)
    assert matmul.select_config(28672, 4096, torch.bfloat16).block_n == 128
    assert matmul.verifier_catalog() == catalog_before
    small = [(1536, 3072), (1024, 3072), (2560, 2048), (896, 896)]
    legacy_small = [matmul.select_config(N, K, torch.bfloat16) for N, K in small]
    monkeypatch.delenv("VOSTI_DECODE_GEMM_ROWS")
    assert [matmul.select_config(N, K, torch.bfloat16) for N, K in small] == legacy_small  # small weights: one rule
    assert matmul.select_config(1536, 3072, torch.bfloat16).split_k == 2
    assert {c["BLOCK_M"] for e in catalog_before if e["kernel"] is matmul.mm_splitk_partial_kernel
            for c, _fam in e["configs"]} >= {16, 64}
    for bad in ("32", "x"):
        monkeypatch.setenv("VOSTI_DECODE_GEMM_ROWS", bad)
        with pytest.raises(ValueError, match="VOSTI_DECODE_GEMM_ROWS"):
            matmul.select_config(4096, 4096, torch.bfloat16)
