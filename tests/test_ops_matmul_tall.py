"""The tall GEMM path (bigger tiles, every split of a tile summed in one program) gives every row the bits
of the split + combine path; it is on by default for 16-bit GEMMs only, and VOSTI_TALL_GEMM=0/1 overrides that.

CPU runs the kernels through the Triton interpreter in fp32 (see conftest). Whether the H200's MMA keeps
these bits across tile shapes is checked by integration/gpu/tall_gemm_check.py."""
import dataclasses

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from test_ops_matmul import _operands
from vosti_plugin.ops import matmul

# Small current-path configs (fp32, interpreter-fast) and the tile shapes a tall launch may use instead.
CURRENT_CONFIGS = [
    matmul.MatmulConfig(block_m=16, block_n=32, block_k=32, split_k=s, num_stages=1) for s in (1, 2, 3, 4)
] + [matmul.MatmulConfig(block_m=16, block_n=16, block_k=16, split_k=s, num_stages=1) for s in (1, 3)]
TALL_TILES = [(32, 64), (64, 32), (64, 64), (32, 128)]


def _current(a, w, bias, config):
    return matmul.launch_matmul(a, w.t(), bias, torch.empty(a.shape[0], w.shape[0]), config)


def _tall(a, w, bias, config):
    return matmul.launch_matmul_tall(a, w.t(), bias, torch.empty(a.shape[0], w.shape[0]), config)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


@settings(max_examples=40)
@given(
    M=st.one_of(st.integers(1, 200), st.sampled_from([31, 33, 47, 64, 129])),
    N=st.integers(1, 150),
    K=st.integers(1, 260),
    config=st.sampled_from(CURRENT_CONFIGS),
    tiles=st.sampled_from(TALL_TILES),
    with_bias=st.booleans(),
    tma=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
@example(M=77, N=50, K=52, config=CURRENT_CONFIGS[3], tiles=(64, 64), with_bias=True, tma=True, seed=1)  # 2 empty splits
@example(M=77, N=50, K=50, config=CURRENT_CONFIGS[3], tiles=(64, 64), with_bias=True, tma=False, seed=1)
@example(M=129, N=150, K=260, config=CURRENT_CONFIGS[5], tiles=(32, 128), with_bias=False, tma=True, seed=2)
def test_tall_row_equals_split_and_combine_row(M, N, K, config, tiles, with_bias, tma, seed):
    """Both tall kernels: the TMA one (where the operands allow descriptors) and the pointer one."""
    a, w, bias = _operands(seed, M, N, K, with_bias)
    tall = dataclasses.replace(config, block_m=tiles[0], block_n=tiles[1], num_warps=8)
    if tma and matmul._tma_operands(a, w.t()):
        got = matmul.launch_matmul_tma(a, w.t(), bias, torch.empty(M, N), tall)
    else:
        got = _tall(a, w, bias, tall)
    assert torch.equal(_bits(got), _bits(_current(a, w, bias, config)))


def test_tma_operands_need_row_major_aligned_tensors():
    a, w, _ = _operands(6, 8, 16, 64, with_bias=False)
    assert matmul._tma_operands(a, w.t())
    assert not matmul._tma_operands(a[:, :62], w[:, :62].t()), "a row of 62 fp32 is not a multiple of 16 bytes"
    assert not matmul._tma_operands(a[:, 4:], w[:, 4:].t()), "a strided view is not row-major"
    assert not matmul._tma_operands(a, w.t().contiguous()), "b must be W^T of a row-major W"


@pytest.mark.parametrize("change", [dict(block_k=16), dict(split_k=2), dict(split_k=4)])
def test_a_tall_launch_with_another_k_order_gives_other_bits(change):
    """Guards the equality test against being vacuous: a tall launch whose K order differs (block_k, or
    split boundaries and the number of partials summed) must change some bits."""
    a, w, bias = _operands(3, 96, 64, 250, with_bias=True)
    config = matmul.MatmulConfig(block_m=16, block_n=32, block_k=32, split_k=3, num_stages=1)
    tall = dataclasses.replace(config, block_m=64, block_n=64, **change)
    assert not torch.equal(_tall(a, w, bias, tall), _current(a, w, bias, config))


def test_summing_the_splits_in_another_order_gives_other_bits():
    """The split order matters in fp32: (p0 + p1) + p2 differs from p2 + (p1 + p0) somewhere, so a tall
    kernel that reordered the combine would be caught by the equality test."""
    a, w, _ = _operands(4, 96, 64, 250, with_bias=False)
    config = matmul.MatmulConfig(block_m=16, block_n=32, block_k=32, split_k=3, num_stages=1)
    kps = config.k_per_split(250)
    parts = [_current(a[:, s * kps:(s + 1) * kps], w[:, s * kps:(s + 1) * kps],
                      None, dataclasses.replace(config, split_k=1)) for s in range(3)]
    in_order = torch.zeros_like(parts[0]) + parts[0] + parts[1] + parts[2]
    assert torch.equal(in_order, _current(a, w, None, config)), "the split path sums its partials in s order"
    reversed_order = torch.zeros_like(parts[0]) + parts[2] + parts[1] + parts[0]
    assert not torch.equal(reversed_order, in_order)


def test_strided_operands_and_output_on_the_tall_path():
    M, N, K = 70, 40, 130
    a, w, bias = _operands(9, M, N + 5, K + 7, with_bias=True)
    a_view = a[:, 3:3 + K]  # row stride K + 7
    w_view = w[2:2 + N, :K]
    b_rowmajor = w_view.t().contiguous()  # [K, N], unit column stride
    for config in (CURRENT_CONFIGS[2], CURRENT_CONFIGS[0]):
        tall = dataclasses.replace(config, block_m=64, block_n=64)
        for b in (w_view.t(), b_rowmajor):
            big = torch.full((M, N + 9), float("nan"))
            out = big[:, 4:4 + N]
            matmul.launch_matmul_tall(a_view, b, bias[:N], out, tall)
            ref = matmul.launch_matmul(a_view.contiguous(), b.contiguous(), bias[:N], torch.empty(M, N), config)
            assert torch.equal(out, ref)
            assert torch.isnan(big[:, :4]).all() and torch.isnan(big[:, 4 + N:]).all(), "wrote outside out"


class _LaunchLog:
    """Records which host launch function ran, then runs it."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[str, int, matmul.MatmulConfig]] = []
        for name in ("launch_matmul", "launch_matmul_tall", "launch_matmul_tma"):
            real = getattr(matmul, name)
            monkeypatch.setattr(matmul, name, self._spy(name, real))

    def _spy(self, name, real):
        def run(a, b, bias, out, config):
            self.calls.append((name, a.shape[0], config))
            return real(a, b, bias, out, config)
        return run


@pytest.mark.parametrize("M", [matmul.TALL_MIN_ROWS, matmul.TALL_MIN_ROWS + 37])
def test_tall_path_is_off_by_default_for_fp32(monkeypatch, M):
    monkeypatch.delenv("VOSTI_TALL_GEMM", raising=False)
    log = _LaunchLog(monkeypatch)
    a, w, bias = _operands(1, M, 128, 128, with_bias=True)
    matmul.linear(a, w, bias)
    assert [c[0] for c in log.calls] == ["launch_matmul"]
    config = matmul.select_config(128, 128, torch.float32)
    assert log.calls[0][2] == (matmul.mid_config(config) if matmul.mid_path_on(M) else config)


@pytest.mark.parametrize("setting, dtype, on", [
    (None, torch.bfloat16, True), (None, torch.float16, True), (None, torch.float32, False),
    ("0", torch.bfloat16, False), ("1", torch.float32, True), ("1", torch.bfloat16, True)])
def test_tall_path_default_is_on_for_16_bit_and_the_env_overrides_it(monkeypatch, setting, dtype, on):
    if setting is None:
        monkeypatch.delenv("VOSTI_TALL_GEMM", raising=False)
    else:
        monkeypatch.setenv("VOSTI_TALL_GEMM", setting)
    assert matmul.tall_path_on(matmul.TALL_MIN_ROWS, dtype) is on
    assert matmul.tall_path_on(matmul.TALL_MIN_ROWS - 1, dtype) is False


def test_tall_path_on_takes_tall_launches_from_the_threshold(monkeypatch):
    monkeypatch.setenv("VOSTI_TALL_GEMM", "1")
    monkeypatch.setenv("VOSTI_TMA_GEMM", "0")   # the pointer kernels' launches (the TMA ones: below)
    log = _LaunchLog(monkeypatch)
    N, K = 128, 344
    a, w, bias = _operands(2, matmul.TALL_MIN_ROWS + 5, N, K, with_bias=True)
    below = matmul.linear(a[: matmul.TALL_MIN_ROWS - 1], w, bias)
    tall = matmul.linear(a, w, bias)
    config = matmul.select_config(N, K, torch.float32)
    tall_config = matmul.tall_config(config, torch.float32)
    assert config.split_k == 1 and tall_config.block_m > config.block_m
    # a split-1 tall launch is mm_kernel with the tall tiles, through launch_matmul
    below_config = matmul.mid_config(config) if matmul.mid_path_on(matmul.TALL_MIN_ROWS - 1) else config
    assert log.calls == [("launch_matmul", matmul.TALL_MIN_ROWS - 1, below_config),
                         ("launch_matmul_tall", matmul.TALL_MIN_ROWS + 5, tall_config),
                         ("launch_matmul", matmul.TALL_MIN_ROWS + 5, tall_config)]
    assert torch.equal(tall[: matmul.TALL_MIN_ROWS - 1], below), "rows must not notice the path switch"


def _spy_on_kernel(monkeypatch, name: str) -> list:
    """Replaces matmul.<name> by a wrapper that records each launch's grid; returns that record."""
    ran, real = [], getattr(matmul, name)

    class Spy:
        def __getitem__(self, grid):
            ran.append(grid)
            return real[grid]

    monkeypatch.setattr(matmul, name, Spy())
    return ran


def test_tall_split_launch_runs_the_one_program_kernel(monkeypatch):
    ran = _spy_on_kernel(monkeypatch, "mm_tall_kernel")
    monkeypatch.setattr(matmul, "splitk_combine_kernel", None)  # the tall path must not need it
    a, w, _ = _operands(5, 100, 48, 200, with_bias=False)
    config = matmul.MatmulConfig(block_m=64, block_n=32, block_k=32, split_k=3, num_stages=1)
    _tall(a, w, None, config)
    assert ran == [(2, 2)]


def test_tma_path_is_on_by_default_and_takes_row_major_operands(monkeypatch):
    N, K = 128, 344
    a, w, bias = _operands(2, matmul.TALL_MIN_ROWS + 5, N, K, with_bias=True)
    monkeypatch.setenv("VOSTI_TALL_GEMM", "1")
    config = matmul.select_config(N, K, torch.float32)
    for setting, strided, want in (("0", False, "launch_matmul_tall"), ("", False, "launch_matmul_tma"),
                                   ("1", False, "launch_matmul_tma"), ("", True, "launch_matmul_tall")):
        monkeypatch.setenv("VOSTI_TMA_GEMM", setting)
        log = _LaunchLog(monkeypatch)
        x = torch.cat([a, a[:, :4]], dim=1)[:, :K] if strided else a
        out = matmul.linear(x, w, bias)
        assert log.calls[0][0] == want, (setting, strided, log.calls)
        config_used = matmul.tma_config(config, torch.float32) if want.endswith("tma") else \
            matmul.tall_config(config, torch.float32)
        assert log.calls[0][2] == config_used
        monkeypatch.undo()
        monkeypatch.setenv("VOSTI_TALL_GEMM", "1")
        assert torch.equal(out, matmul.launch_matmul(a, w.t(), bias, torch.empty(a.shape[0], N), config))


@pytest.mark.parametrize("split_k", [1, 3])
def test_tma_launch_runs_the_tma_kernel_alone(monkeypatch, split_k):
    ran = _spy_on_kernel(monkeypatch, "mm_tall_tma_kernel")
    for other in ("mm_tall_kernel", "mm_kernel", "splitk_combine_kernel", "mm_splitk_partial_kernel"):
        monkeypatch.setattr(matmul, other, None)
    a, w, _ = _operands(5, 100, 48, 200, with_bias=False)
    config = matmul.MatmulConfig(block_m=64, block_n=32, block_k=32, split_k=split_k, num_stages=1)
    matmul.launch_matmul_tma(a, w.t(), None, torch.empty(100, 48), config)
    assert ran == [(2, 2, 1)]


@pytest.mark.parametrize("split_k", [1, 3])
def test_tma_launch_walks_row_tiles_in_groups_and_keeps_every_row(monkeypatch, split_k):
    """38 row tiles: groups of 16, 16 and 6 (the last group's other programs return at once); every row equals
    the decode path's (the column walk off: it would take the whole 256-row chunks)."""
    monkeypatch.setenv("VOSTI_TMA_COLS_GEMM", "0")
    ran = _spy_on_kernel(monkeypatch, "mm_tall_tma_kernel")
    M, N, K = 600, 48, 200
    a, w, bias = _operands(9, M, N, K, with_bias=True)
    config = matmul.MatmulConfig(block_m=16, block_n=32, block_k=32, split_k=split_k, num_stages=1)
    got = matmul.launch_matmul_tma(a, w.t(), bias, torch.empty(M, N), config)
    assert ran == [(matmul.TALL_GROUP_ROW_TILES, 2, 3)]
    assert torch.equal(_bits(got), _bits(_current(a, w, bias, config)))


def _spy_on_tma_kernels(monkeypatch, column_walk: str | None = None) -> tuple[list, list]:
    """The grids the column-walking and the grouped TMA kernels launch, with VOSTI_TMA_COLS_GEMM unset or set."""
    if column_walk is None:
        monkeypatch.delenv("VOSTI_TMA_COLS_GEMM", raising=False)
    else:
        monkeypatch.setenv("VOSTI_TMA_COLS_GEMM", column_walk)
    return _spy_on_kernel(monkeypatch, "mm_tall_tma_cols_kernel"), _spy_on_kernel(monkeypatch, "mm_tall_tma_kernel")


def test_tma_launch_walks_columns_in_whole_chunks_and_keeps_every_row(monkeypatch):
    """Two whole chunks of TALL_COL_ROW_TILES row tiles go to the column-walking kernel (each program walks column
    tiles q, q + TALL_COL_PROGRAMS, ...: 16 column tiles over 8 programs), the five rows past them to the grouped
    kernel; every row equals the decode path's."""
    cols, groups = _spy_on_tma_kernels(monkeypatch)
    config = matmul.MatmulConfig(block_m=4, block_n=8, block_k=32, split_k=1, num_stages=1)
    chunk = matmul.TALL_COL_ROW_TILES * config.block_m
    M, N, K = 2 * chunk + 5, 16 * config.block_n - 3, 200
    a, w, bias = _operands(11, M, N, K, with_bias=True)
    got = matmul.launch_matmul_tma(a, w.t(), bias, torch.empty(M, N), config)
    assert cols == [(matmul.TALL_COL_PROGRAMS, matmul.TALL_COL_ROW_TILES)] * 2
    assert groups == [(2, 16, 1)]
    assert torch.equal(_bits(got), _bits(_current(a, w, bias, config)))


@pytest.mark.parametrize("col_tiles, walks", [(8, True), (16, True), (12, False), (10, False), (73, True),
                                               (57, False)])
def test_the_column_walk_takes_only_column_tiles_that_share_out_evenly(monkeypatch, col_tiles, walks):
    """10 tiles over 8 programs leave the second round 1/4 busy (Gemma-3-4B's o_proj: slower than one program a
    tile on the H100); 73 over 8 keep 91 % of the programs busy over the rounds, 57 over 8 only 89 %."""
    monkeypatch.delenv("VOSTI_TMA_COLS_GEMM", raising=False)
    config = matmul.tma_config(matmul.select_config(4096, 4096, torch.bfloat16), torch.bfloat16)
    config = dataclasses.replace(config, split_k=1)
    wide = matmul.tma_cols_path(col_tiles * 256 - 5, config, torch.bfloat16)
    assert (wide is not None) == walks
    if walks:
        assert (wide.block_n, wide.block_k, wide.split_k) == (256, config.block_k, 1)


def test_split_tma_launches_run_one_program_a_tile_in_whole_chunks_too(monkeypatch):
    cols, groups = _spy_on_tma_kernels(monkeypatch)
    config = matmul.MatmulConfig(block_m=4, block_n=8, block_k=32, split_k=3, num_stages=1)
    M = matmul.TALL_COL_ROW_TILES * config.block_m
    a, w, _ = _operands(13, M, 20, 200, with_bias=False)
    got = matmul.launch_matmul_tma(a, w.t(), None, torch.empty(M, 20), config)
    assert cols == [] and groups == [(matmul.TALL_GROUP_ROW_TILES, 3, 1)]
    assert torch.equal(_bits(got), _bits(_current(a, w, None, config)))
    with pytest.raises(ValueError, match="split 1 only"):
        matmul.tma_cols_config(config, torch.bfloat16)


def test_tma_launch_without_the_column_walk_runs_one_program_a_tile(monkeypatch):
    cols, groups = _spy_on_tma_kernels(monkeypatch, column_walk="0")
    config = matmul.MatmulConfig(block_m=4, block_n=8, block_k=32, split_k=1, num_stages=1)
    M = matmul.TALL_COL_ROW_TILES * config.block_m
    a, w, _ = _operands(12, M, 20, 64, with_bias=False)
    matmul.launch_matmul_tma(a, w.t(), None, torch.empty(M, 20), config)
    assert cols == [] and groups == [(matmul.TALL_GROUP_ROW_TILES, 3, 1)]


def test_the_column_walk_tiles_keep_the_k_order():
    for (N, K, dtype_name), config in matmul.CATALOG.items():
        dtype = getattr(torch, dtype_name)
        tma = matmul.tma_config(config, dtype)
        if tma.split_k > 1:
            continue
        wide = matmul.tma_cols_config(tma, dtype)
        assert (wide.block_m, wide.block_k, wide.split_k, wide.block_n) == (tma.block_m, tma.block_k, 1, 256)
        assert (wide.block_m + wide.block_n) * wide.block_k * 2 * wide.num_stages <= 227 * 1024


def test_tall_configs_keep_the_k_order_and_fit_in_shared_memory():
    for (N, K, dtype_name), config in matmul.CATALOG.items():
        dtype = getattr(torch, dtype_name)
        tma = matmul.tma_config(config, dtype)
        assert tma.split_k == config.split_k and tma.k_per_split(K) == config.k_per_split(K)
        assert tma.k_per_split(K) % tma.block_k == 0, "a TMA K block must not straddle a split boundary"
        tall = matmul.tall_config(config, dtype)
        assert (tall.block_k, tall.split_k) == (config.block_k, config.split_k)
        assert tall.k_per_split(K) == config.k_per_split(K)
        assert tall.block_m >= config.block_m and tall.block_n >= config.block_n
        smem = (tall.block_m * tall.block_k + tall.block_k * tall.block_n) * dtype.itemsize * tall.num_stages
        assert smem <= 227 * 1024, f"{N}x{K}: {smem} bytes of shared memory"


_TMA_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "HAS_BIAS": True, "DOT_PRECISION": "tf32", "SPLIT_K": 4,
               "GROUP_M": 16}
_COLS_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "HAS_BIAS": True, "DOT_PRECISION": "tf32",
                "COL_PROGRAMS": 8}


@pytest.mark.parametrize("kernel, old, new, config", [
    ("mm_tall_kernel", "(k0 + BLOCK_K) % K_PER_SPLIT == 0", "(k0 + BLOCK_K) % M == 0",
     {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "HAS_BIAS": True, "DOT_PRECISION": "tf32"}),
    ("mm_tall_tma_kernel", "for s in range(0, SPLIT_K):", "for s in range(0, SPLIT_K - M % 2):", _TMA_CONFIG),
    # groups that overlap (two programs write a row tile, another is never written) and a last row tile skipped
    ("mm_tall_tma_kernel", "tl.program_id(2) * GROUP_M + tl.program_id(0)",
     "tl.program_id(2) * (GROUP_M - 1) + tl.program_id(0)", _TMA_CONFIG),
    ("mm_tall_tma_kernel", "if pid_m * BLOCK_M >= M:", "if pid_m * BLOCK_M >= M - 1:", _TMA_CONFIG),
    # column walks that overlap or leave the last column tile, and a K loop whose start follows M
    ("mm_tall_tma_cols_kernel", "COL_PROGRAMS, flatten=True", "COL_PROGRAMS - 1, flatten=True", _COLS_CONFIG),
    ("mm_tall_tma_cols_kernel", "tl.cdiv(N, BLOCK_N), COL_PROGRAMS", "tl.cdiv(N, BLOCK_N) - 1, COL_PROGRAMS",
     _COLS_CONFIG),
    ("mm_tall_tma_cols_kernel", "for k0 in range(0, K, BLOCK_K):", "for k0 in range(M % 2 * BLOCK_K, K, BLOCK_K):",
     _COLS_CONFIG),
])
def test_verifier_proves_a_tall_kernel_and_refuses_an_m_dependent_split(kernel, old, new, config):
    import inspect

    from vosti_plugin.verifier.api import verify_kernel
    from vosti_plugin.verifier.contracts import contract_of

    spec = contract_of(getattr(matmul, kernel))
    source = inspect.getsource(getattr(matmul, kernel).fn)
    source = source[source.index("@triton.jit"):]
    mutant = source.replace(old, new)
    assert mutant != source
    assert verify_kernel(source, spec, config).status == "proved"
    assert verify_kernel(mutant, spec, config).status == "failed"


# -- the H200 script (integration/gpu/tall_gemm_check.py), its logic run on CPU ---------------------------

def _check_script():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "integration" / "gpu" / "tall_gemm_check.py"
    spec = importlib.util.spec_from_file_location("tall_gemm_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tall_gemm_check"] = module
    spec.loader.exec_module(module)
    return path, module


@pytest.mark.slow
def test_gpu_check_script_cpu_smoke_passes_and_writes_its_report(tmp_path):
    import json
    import os
    import subprocess
    import sys

    path, _ = _check_script()
    out = tmp_path / "tall.json"
    proc = subprocess.run([sys.executable, str(path), "--cpu-smoke", "--no-timing", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["bits_pass"] and not report["errors"]
    bits = report["sections"]["bits"]
    assert bits["controls"]["other_block_k_differs"] is True
    assert all(c["bad_rows"]["n"] == 0 and c["decode_bad_rows"]["checked"] > 0 for c in bits["cases"])
    assert any(c["config"]["split_k"] > 1 for c in bits["cases"]) and any("bad_rows_bias" in c for c in bits["cases"])
    sweep = report["sections"]["sweep"]
    assert all(g["best_bit_equal"] is not None for g in sweep["per_gemm"].values())
    assert all(sweep["per_tall_key"][key]["ranked_total_us"] for key in ("bk32/split", "bk32/nosplit"))


def test_gpu_check_script_reports_tall_rows_with_other_bits(monkeypatch):
    """The script's bit checks can fail: a tall launch that reduces in another K order (block_k 16) is
    reported by both the M-row and the decode comparison, and the section fails."""
    _, script = _check_script()
    script._use_cpu_smoke()
    monkeypatch.setattr(script, "MODELS", {"tiny": {"qkv": (96, 200)}})
    launch = script._launch

    def tall_in_another_order(kind, a, w, bias, config):
        return launch(kind, a, w, bias, dataclasses.replace(config, block_k=16) if kind == "tall" else config)

    monkeypatch.setattr(script, "_launch", tall_in_another_order)
    report = script.Report("")
    assert script.section_bits(report, [33], deadline=float("inf")) is False
    failures = report.data["sections"]["bits"]["failures"]
    assert any(f.startswith("bits ") for f in failures) and any(f.startswith("decode ") for f in failures)


def test_gpu_check_script_refuses_a_tall_config_with_another_k_order(monkeypatch):
    _, script = _check_script()
    script._use_cpu_smoke()
    shipped = script._tall_config
    monkeypatch.setattr(script, "_tall_config", lambda N, K: dataclasses.replace(shipped(N, K), block_k=16))
    with pytest.raises(AssertionError, match="K order"):
        script.section_bits(script.Report(""), [33], deadline=float("inf"))


def test_gpu_check_script_records_a_failing_launch_and_checks_the_other_cases(monkeypatch):
    _, script = _check_script()
    script._use_cpu_smoke()
    monkeypatch.setattr(script, "MODELS", {"tiny": {"qkv": (96, 200), "o": (64, 64)}})
    launch = script._launch

    def tall_fails_on_qkv(kind, a, w, bias, config):
        if kind == "tall" and w.shape[0] == 96:
            raise RuntimeError("out of resources: shared memory")
        return launch(kind, a, w, bias, config)

    monkeypatch.setattr(script, "_launch", tall_fails_on_qkv)
    report = script.Report("")
    assert script.section_bits(report, [33], deadline=float("inf")) is False
    cases = report.data["sections"]["bits"]["cases"]
    assert "shared memory" in cases[0]["error"] and cases[1]["bad_rows"]["n"] == 0


@pytest.mark.parametrize("tma", ["1", "0"])
def test_a_gemm_launches_the_kernel_and_config_launch_path_names(monkeypatch, tma):
    """launch_path is the dispatch (the capture sizes' test and readers use it): for rows below the mid tiles, in
    them, below and on the tall path, `linear` runs the kernel and launch config it names, and no other."""
    monkeypatch.setenv("VOSTI_TALL_GEMM", "1")
    monkeypatch.setenv("VOSTI_TMA_GEMM", tma)
    monkeypatch.delenv("VOSTI_MID_GEMM", raising=False)
    N, K = 128, 344
    config = matmul.select_config(N, K, torch.float32)
    a, w, _ = _operands(3, matmul.TALL_MIN_ROWS + 5, N, K, with_bias=False)
    named = {"rows": "launch_matmul", "tall": "launch_matmul_tall", "tma": "launch_matmul_tma"}
    seen = set()
    for M in (1, matmul.MID_MIN_ROWS, matmul.TALL_MIN_ROWS - 1, matmul.TALL_MIN_ROWS + 5):
        log = _LaunchLog(monkeypatch)
        matmul.linear(a[:M], w)
        kernel, launch = matmul.launch_path(M, config, torch.float32)
        assert log.calls[0] == (named[kernel], M, launch), M
        seen.add((kernel, launch.block_m))
    assert {k for k, _ in seen} == {"rows", "tma" if tma == "1" else "tall"}
    assert len({bm for k, bm in seen if k == "rows"}) == 2, "decode and mid tiles"
