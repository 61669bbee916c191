"""Batch-invariant matmul: mm, addmm (bias) and linear (x @ W^T + b) in Triton.

Row invariance: for output row x the kernel reduces over K in an order fixed by the launch config,
and the config is chosen from (N, K, dtype) alone (`select_config`), never from M. M only changes
how many row tiles are launched. A K split is allowed: its split count, split boundaries and the
order in which the fp32 partials are combined are functions of (N, K, dtype) too. No stream-K, no
autotuning, no atomics.

Tall path, for launches of at least TALL_MIN_ROWS rows: the same block_k, split boundaries and combine
order with bigger row/column tiles, all splits of a tile summed inside one program (`mm_tall_kernel`), so
prefill GEMMs skip the fp32 workspace and the second launch. On by default for 16-bit GEMMs (the H200 check
found its rows equal to the split + combine rows bit for bit); VOSTI_TALL_GEMM=0 turns it off, =1 turns it
on for fp32 too. Tall launches of row-major, 16-byte aligned operands on sm90+ take mm_tall_tma_kernel (TMA
descriptor loads, its own tiles, the same splits), whose whole 2048-row chunks take mm_tall_tma_cols_kernel
(each program walks column tiles of one row tile; VOSTI_TMA_COLS_GEMM=0 keeps them on one program a tile);
VOSTI_TMA_GEMM=0 keeps them on the pointer kernels.

Mid path, on unless VOSTI_MID_GEMM=0: launches of MID_MIN_ROWS rows up to the tall path's take the decode
config in 64-row tiles (`mid_config`), which read the weight a quarter as often as 16-row decode tiles.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor, tensor_descriptor
from vosti_plugin.launch import guard
from vosti_plugin.ops import dependent_launch
from vosti_plugin.ops.gemm_rows import MID_MIN_ROWS, MID_TILE_ROWS, TALL_MIN_ROWS, TALL_TILE_ROWS, mid_gemm_on
from vosti_plugin.triton_mode import interpreting, use_lane_invariant_interpreter

use_lane_invariant_interpreter()

__all__ = [
    "CATALOG",
    "MatmulConfig",
    "MID_MIN_ROWS",
    "TALL_MIN_ROWS",
    "addmm",
    "launch_matmul",
    "launch_matmul_tall",
    "launch_matmul_tma",
    "launch_path",
    "linear",
    "mid_config",
    "mid_path_on",
    "mm",
    "rule_config",
    "rule_configs",
    "select_config",
    "tall_config",
    "tall_path_on",
    "tma_cols_config",
    "tma_cols_on",
    "tma_cols_path",
    "tma_config",
    "tma_path_on",
]


@dataclass(frozen=True)
class MatmulConfig:
    block_m: int
    block_n: int
    block_k: int
    split_k: int
    num_warps: int = 4
    num_stages: int = 3
    split_block_k: int = 0  # what split lengths are rounded up to (0: block_k); a tall config keeps its decode one's

    def k_per_split(self, K: int) -> int:
        """Length of each K slice, a multiple of split_block_k (or block_k); the last slice may be shorter."""
        granule = self.split_block_k or self.block_k
        return triton.cdiv(triton.cdiv(K, self.split_k), granule) * granule


# GPU (bf16/fp16). Decode tiles hold 16 activation rows: below wgmma's 64 they run mma.sync, and their operand
# stages take 40-60 KB of shared memory instead of 96-128 KB, so 3-5 CTAs share an SM instead of 2 and keep more
# weight reads in flight. From integration/gpu/decode_gemm_sweep.py --block-m 16,64 on the H200 (62 layer shapes of
# the served geometries, M = 1/4/16, 60-110 configs each): every 16-row config's rows were equal, bit for bit, to
# the tall path's rows of the same inputs; column tiles of 32 (64 from N = 16384), block_k 128, 4 stages and about
# 200 programs put the layer GEMMs at 1.04x the per-shape best 16-row config and 0.94x the 64-row rule before it
# (geometric means), with 80 of 174 cells within 1.3x of the weight-read floor (64-row rule 49, cuBLAS 74). The
# tall path's tiles and K order do not depend on these tiles (tall_config / tma_config), and the startup probe
# compares a decoded row with its tall-path row on the deployment's GPU. Decode GEMMs whose N gives too few column
# tiles split K; the split count is part of the key's config, not of M.
# VOSTI_DECODE_GEMM_ROWS=64 restores the 64-row (wgmma) rule of sessions 9-23: 64 x 64 x 128 tiles, 3 stages (128
# columns x 64 deep, 4 stages, above N = 8192), about 160 programs. Its rows are the tall path's too; it is the
# fallback should 16-row tiles cost a deployment more than they save (launches of 17-63 rows take more row tiles).
#
# A split also sets the K order of every prefill row of the shape, and the tall path holds two accumulators a
# tile for it (128 x 128 tiles, no column walk): integration/gpu/split_choice.py on the H100 (results/h100-s43,
# the 22 served shapes that split) timed the tall path of the shipped split at 0.96-1.24x the unsplit config's
# time at 16384 rows. Unsplit, only N = 6144 (192 column tiles: Llama-3.1-8B, Mistral-7B and Qwen3-8B qkv) also
# decoded faster (0.94-0.98x at M = 1-16, and 0.83x / 0.84x the tall time at 2048 / 16384 rows); every shape of
# 160 column tiles or fewer decoded 1.03-1.66x slower unsplit at M = 1. So from unsplit_min_tiles column
# tiles K is not split.
@dataclasses.dataclass(frozen=True)
class _WideRule:
    narrow: dict            # tile base up to narrow_max_n output columns
    wide: dict              # tile base above it
    narrow_max_n: int
    target_programs: int    # splits are added until column tiles x splits reach this
    unsplit_min_tiles: int  # ... unless the column tiles alone are at least this many


_WIDE_RULES = {
    16: _WideRule(dict(block_m=16, block_n=32, block_k=128, num_warps=4, num_stages=4),
                  dict(block_m=16, block_n=64, block_k=128, num_warps=4, num_stages=4), 16383, 200, 176),
    64: _WideRule(dict(block_m=64, block_n=64, block_k=128, num_warps=4, num_stages=3),
                  dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4), 8192, 160, 160),
}
# CPU (Triton interpreter, fp32): few, large programs are what make the interpreter fast.
_F32_CPU = dict(block_m=32, block_n=128, block_k=64, num_warps=4, num_stages=1)

_MIN_K_PER_SPLIT = 512
_MAX_SPLIT = 16            # what 19 served geometries reach (integration/geometries); bounds the proved set
# Small weights (N <= 8192, K < 4096, at most 32 MB in bf16) are read in launch and memory latency, not at the
# copy rate: there a second launch (the split-K combine) costs more than a longer K loop, so they take one
# launch with the widest column tile that still gives _SMALL_MIN_TILES programs, splitting K only when it is at
# least twice N. From integration/gpu/decode_gemm_sweep.py --small-mb 32 on the H200 (26 shapes, M = 1 and 16,
# 1911 configs, every one's rows equal to the tall path's): 1.05x the per-shape best, against 1.13x for the
# wide-shape rule above; K of 4096 and more keeps that rule, whose splits win there.
_B16_SMALL = dict(block_m=64, block_k=128, num_warps=4, num_stages=4)
_SMALL_BLOCK_N = (64, 32, 16)
_SMALL_MIN_TILES = 72
_SMALL_MAX_K = 4096
_SMALL_MAX_ELEMS = 16 * 2 ** 20
_SMALL_TARGET_PROGRAMS = 160  # when K >= 2N splits it (the sweep's value)


def decode_gemm_rows() -> int:
    """Activation rows per decode GEMM tile on a GPU, from VOSTI_DECODE_GEMM_ROWS (default 16)."""
    raw = os.environ.get("VOSTI_DECODE_GEMM_ROWS", "").strip() or "16"
    if not raw.isdigit() or int(raw) not in _WIDE_RULES:
        raise ValueError(f"VOSTI_DECODE_GEMM_ROWS={raw!r}: decode GEMM tiles of "
                         f"{' or '.join(map(str, _WIDE_RULES))} rows")
    return int(raw)


def _split_for(N: int, K: int, block_n: int, block_k: int, target: int) -> int:
    tiles = triton.cdiv(N, block_n)
    split = 1
    while (split < _MAX_SPLIT and tiles * split < target
           and K // (2 * split) >= max(_MIN_K_PER_SPLIT, block_k)):
        split *= 2
    return split


def _is_small(N: int, K: int) -> bool:
    return N <= 8192 and K < _SMALL_MAX_K and N * K <= _SMALL_MAX_ELEMS


def _small_config(N: int, K: int) -> MatmulConfig:
    block_n = next((bn for bn in _SMALL_BLOCK_N if triton.cdiv(N, bn) >= _SMALL_MIN_TILES), _SMALL_BLOCK_N[-1])
    split = _split_for(N, K, block_n, _B16_SMALL["block_k"], _SMALL_TARGET_PROGRAMS) if K >= 2 * N else 1
    return MatmulConfig(block_n=block_n, split_k=split, **_B16_SMALL)


def rule_config(N: int, K: int, dtype: torch.dtype, rows: int | None = None) -> MatmulConfig:
    """Config for any (N, K, dtype) that has no catalog entry: a pure function of its arguments and of the
    deployment's decode tile height (`rows`, default VOSTI_DECODE_GEMM_ROWS)."""
    if dtype == torch.float32:
        if interpreting():
            return MatmulConfig(split_k=1, **_F32_CPU)
        return MatmulConfig(block_m=64, block_n=64, block_k=32, split_k=1, num_warps=4, num_stages=3)
    if _is_small(N, K):
        return _small_config(N, K)
    rule = _WIDE_RULES[rows or decode_gemm_rows()]
    base = rule.narrow if N <= rule.narrow_max_n else rule.wide
    if triton.cdiv(N, base["block_n"]) >= rule.unsplit_min_tiles:
        return MatmulConfig(split_k=1, **base)
    return MatmulConfig(split_k=_split_for(N, K, base["block_n"], base["block_k"], rule.target_programs), **base)


def _splits(top: int) -> list[int]:
    return [1 << i for i in range(top.bit_length()) if 1 << i <= top]


def rule_configs() -> list[tuple[MatmulConfig, torch.dtype]]:
    """Every config `rule_config` can return for some (N, K) on a GPU: both wide-shape tile bases with every
    split count `_split_for` can reach (powers of two up to _MAX_SPLIT), and the small-weight tiles with the
    splits a K under _SMALL_MAX_K allows, so any decoder geometry's GEMMs launch configs the verifier proved."""
    small_top = (_SMALL_MAX_K - 1) // _MIN_K_PER_SPLIT  # K // (2 * split) >= 512 before the last doubling
    configs = []
    for dtype in (torch.bfloat16, torch.float16):
        for base in [b for rule in _WIDE_RULES.values() for b in (rule.narrow, rule.wide)]:
            configs += [(MatmulConfig(split_k=split, **base), dtype) for split in _splits(_MAX_SPLIT)]
        configs += [(MatmulConfig(block_n=bn, split_k=split, **_B16_SMALL), dtype)
                    for bn in _SMALL_BLOCK_N for split in _splits(small_top)]
    return configs


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _catalog() -> dict[tuple[int, int, str], MatmulConfig]:
    """(N, K, dtype) of the GEMMs of the models we serve -> config (TP=1 shapes).

    Entries equal to what `rule_config` would pick are still listed, so the verifier and a reader see
    every launch shape of a supported model in one place.
    """
    shapes = {
        # Llama-3.1-8B: qkv, o, gate_up, down, lm_head
        (6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096),
        # Qwen3-8B: qkv, o, gate_up, down, lm_head
        (6144, 4096), (4096, 4096), (24576, 4096), (4096, 12288), (151936, 4096),
        # Gemma-3-4B: qkv (8 x 256 + 2 x 4 x 256), o, gate_up, down, lm_head
        (4096, 2560), (2560, 2048), (20480, 2560), (2560, 10240), (262208, 2560),
    }
    catalog = {}
    for N, K in sorted(shapes):
        for dtype in (torch.bfloat16, torch.float16):
            catalog[(N, K, _dtype_name(dtype))] = rule_config(N, K, dtype, rows=16)
    return catalog


CATALOG: dict[tuple[int, int, str], MatmulConfig] = _catalog()


def select_config(N: int, K: int, dtype: torch.dtype) -> MatmulConfig:
    """The launch config for a GEMM with N output columns and reduction length K. Never sees M."""
    rows = decode_gemm_rows()
    found = CATALOG.get((N, K, _dtype_name(dtype))) if rows == 16 else None
    return found if found is not None else rule_config(N, K, dtype, rows)


# Prefill tiles of the pointer kernels: 128-row tiles and 8 warps; block_k and split_k stay the config's. A
# split tile holds two fp32 accumulators (the split's and the total), so it stays 128 x 128 (128 registers a
# thread); one accumulator may be 128 x 256 when block_k leaves room. Operand stages:
# (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 bytes * stages, at most 192 KB of the 227 KB an SM has.
_TALL_B16_BLOCK_M = TALL_TILE_ROWS
_TALL_B16_STAGE_BYTES = 160 * 1024  # 4 stages when they fit in this, else 3
# Tiles of the TMA kernel (integration/gpu/tall_variants.py on the H200: 128 x 128 x 64, 8 warps, 4 stages was
# the fastest bit-equal variant over the Llama-3.1-8B and Gemma-3-4B GEMMs at M = 1024 and 4096). Its block_k
# may differ from the decode config's: Hopper's MMA chain adds one product per K step into the accumulator
# in K order whatever the block holds (checked bit for bit there), and the split boundaries stay the decode
# config's (split_block_k).
_TMA_B16 = dict(block_m=TALL_TILE_ROWS, block_n=128, block_k=64, num_warps=8, num_stages=4)


# Launches of MID_MIN_ROWS rows up to the tall path's take the decode config with 64-row activation tiles: the
# same column tile, K order (block_k, split_k, split lengths) and stages, so a row keeps its bits (the verifier
# proves a split-1 config's rows across BLOCK_M; for split configs, as on the tall path, the agreement is a GPU
# fact the startup probe compares on the deployment's GPU). The 16-row decode tiles
# re-read the weight once per 16 rows. integration/gpu/decode_gemm_sweep.py --block-m 16,64 --m 64,256 on the H200
# (53 layer shapes of the served geometries, integration/results/h200-s27/gemm-mid-rows): these tiles take 0.65x
# the decode tiles' time at M = 64 and 0.58x at M = 256 (geometric means; never slower), every row equal to the
# tall path's (which is faster still from 256 rows: ops/gemm_rows.py); through vLLM, Llama-3.1-8B decodes a batch
# of 64 at 0.80-0.83x stock instead of 0.56-0.57x (integration/results/h200-s28). VOSTI_MID_GEMM=0 keeps these
# launches on the decode tiles.


@functools.lru_cache(maxsize=None)   # called per GEMM launch of 64+ rows while the switch is on
def mid_config(config: MatmulConfig) -> MatmulConfig:
    """The launch config of `config` for launches of MID_MIN_ROWS or more rows below the tall path's: 64-row
    tiles, everything else (and so the K order) the decode config's."""
    return dataclasses.replace(config, block_m=max(config.block_m, MID_TILE_ROWS))


def mid_path_on(M: int) -> bool:
    """Whether an M-row GEMM that does not take the tall path takes `mid_config`'s tiles: from MID_MIN_ROWS
    rows unless VOSTI_MID_GEMM=0 (any dtype)."""
    return M >= MID_MIN_ROWS and mid_gemm_on()


def tall_config(config: MatmulConfig, dtype: torch.dtype) -> MatmulConfig:
    """The tall-path launch config of `config` for the pointer kernels: bigger tiles, the same K order
    (block_k, split_k)."""
    if dtype == torch.float32:
        return dataclasses.replace(config, block_m=max(config.block_m, 128))
    block_m = _TALL_B16_BLOCK_M
    block_n = 256 if config.split_k == 1 and config.block_k <= 64 else 128
    stage_bytes = (block_m + block_n) * config.block_k * 2
    stages = 4 if 4 * stage_bytes <= _TALL_B16_STAGE_BYTES else 3
    return dataclasses.replace(config, block_m=block_m, block_n=block_n, num_warps=8, num_stages=stages)


def tma_config(config: MatmulConfig, dtype: torch.dtype) -> MatmulConfig:
    """The tall-path launch config of `config` for mm_tall_tma_kernel: the same splits (split_k and split
    lengths). fp32 keeps block_k: the interpreter's dot rounds once per block, so block_k is its K order."""
    if dtype == torch.float32:
        return tall_config(config, dtype)
    granule = config.split_block_k or config.block_k
    if granule % _TMA_B16["block_k"]:
        raise ValueError(f"TMA block_k {_TMA_B16['block_k']} does not divide the split granule {granule}")
    return dataclasses.replace(config, split_block_k=granule, **_TMA_B16)


def tma_cols_config(config: MatmulConfig, dtype: torch.dtype) -> MatmulConfig:
    """mm_tall_tma_cols_kernel's tiles for the split-1 TMA config `config`: 256 columns wide (16-bit; fp32 keeps
    the interpreter's tiles). The K order (block_k) stays."""
    if config.split_k > 1:
        raise ValueError("the column-walking TMA kernel holds one accumulator a tile: split 1 only")
    if dtype == torch.float32:
        return config
    return dataclasses.replace(config, block_n=256, num_stages=3)


def tma_cols_on() -> bool:
    """Whether whole 2048-row chunks of tall TMA launches may take mm_tall_tma_cols_kernel: yes unless
    VOSTI_TMA_COLS_GEMM=0 (then mm_tall_tma_kernel, the same bits)."""
    return os.environ.get("VOSTI_TMA_COLS_GEMM", "") != "0"


def tma_cols_path(N: int, config: MatmulConfig, dtype: torch.dtype) -> MatmulConfig | None:
    """The column walk's config for whole chunks of a tall TMA launch of the TMA config `config` over N columns,
    or None where they run one program a tile: split tiles, VOSTI_TMA_COLS_GEMM=0, and N whose column tiles do not
    share out evenly (under 90 % of the programs' slots over their rounds busy: on the H100 Gemma-3-4B's o_proj,
    10 tiles over 8 programs, took 1.04x at 2048 rows and 1.35x at 16384 the time of one program a tile)."""
    if config.split_k > 1 or not tma_cols_on():
        return None
    wide = tma_cols_config(config, dtype)
    col_tiles = triton.cdiv(N, wide.block_n)
    rounds = triton.cdiv(col_tiles, TALL_COL_PROGRAMS)
    return wide if col_tiles >= 0.9 * rounds * TALL_COL_PROGRAMS else None


def tma_path_on() -> bool:
    """Whether tall launches take mm_tall_tma_kernel where the operands allow it: yes unless VOSTI_TMA_GEMM=0.
    On the H200 it prefills Llama-3.1-8B 1.1-1.15x faster than the pointer kernels through vLLM, with the four
    classes bitwise (integration/results/h200-s11)."""
    return os.environ.get("VOSTI_TMA_GEMM", "") != "0"


def tall_path_on(M: int, dtype: torch.dtype) -> bool:
    """Whether an M-row GEMM in `dtype` takes the tall path. Default: yes for 16-bit dtypes, whose tall rows
    the H200 check (integration/gpu/tall_gemm_check.py, and the four classes with VOSTI_TALL_GEMM=1) found
    equal to the split + combine rows bit for bit; VOSTI_TALL_GEMM=0 or 1 overrides it for every dtype."""
    if M < TALL_MIN_ROWS:
        return False
    setting = os.environ.get("VOSTI_TALL_GEMM", "")
    if setting in ("0", "1"):
        return setting == "1"
    return dtype in (torch.bfloat16, torch.float16)


def _launch_metadata(grid, kernel, args):
    M, N, K = args["M"], args["N"], args["K"]
    nbytes = args["c_ptr"].element_size()
    return {
        "name": f"{kernel.name} [M={M}, N={N}, K={K}]",
        f"flops{nbytes * 8}": 2.0 * M * N * K,
        "bytes": nbytes * (M * K + N * K + M * N),
    }


_jit_options = {} if interpreting() else {"launch_metadata": _launch_metadata}


# Relational contract (checked by `vosti verify`): launches L (M_L rows) and R (one row) with equal b,
# bias, N, K and config give row x of L the bits of R's row whenever their `a` rows are equal.
# Why: row x is computed by program (x // BLOCK_M, n) at tile row x % BLOCK_M; its accumulator runs
# over k0 = 0, BLOCK_K, ... < K in that order whatever M is; rows >= M are masked loads of 0 and
# masked stores, and never mix into another row's accumulator. mm_kernel's goal is also proved across
# tiles (catalog `cross`: a split-1 config's tall launch, bigger BLOCK_M/BLOCK_N, against its decode
# launch): the K loop does not see the tile shape, and each tl.dot element is trusted to depend only on
# its row, its column and BLOCK_K (the check a same-K-order GPU run makes: tall_gemm_check.py).
_ROW_PRE = ("R.M == 1", "0 <= x < L.M")  # row x of a launch of any M vs a launch of one row
# The kernels index K and N in int32 (only rows are int64): the element offsets of b, and a's and c's
# column offsets, must fit int32 (the verifier's int-overflow obligation needs these).
_I32 = 2 ** 31
_INT32_OFFSETS = tuple(c.format(S=S, I=_I32) for S in "LR" for c in (
    "(K - 1) * {S}.stride_ak < {I}", "(K - 1) * {S}.stride_bk + (N - 1) * {S}.stride_bn < {I}",
    "(N - 1) * {S}.stride_cn < {I}"))
def _row_goal(a: str, b: str, same: tuple[str, ...], across: tuple[str, ...] = (), witness: dict | None = None):
    """Row x of an M-row launch equals the one-row launch's row, given equal a rows, b and bias (with
    `across`, also when the two launches' tiles differ in those constexprs)."""
    return goal("row_invariance", same=same,
                pre=_ROW_PRE + (f"L.{a}[x, :] == R.{a}[0, :]", f"L.{b}[:, :] == R.{b}[:, :]",
                                "L.bias_ptr[:] == R.bias_ptr[:]"),
                post=("L.c_ptr[x, :] == R.c_ptr[0, :]",), across=across, witness=witness)


_SPLIT_ROWS_INT32 = tuple(f"SPLIT_K * {S}.M < {_I32}" for S in "LR")  # split * M is formed in int32
_SPLIT_WORKSPACE = tuple(f"{S}.PR == SPLIT_K * {S}.M" for S in "LR")  # part holds SPLIT_K row blocks of M


@contract(
    params={"a_ptr": tensor(("M", "K"), ("stride_am", "stride_ak")),
            "b_ptr": tensor(("K", "N"), ("stride_bk", "stride_bn")),
            "bias_ptr": tensor(("N",), (1,)),
            "c_ptr": tensor(("M", "N"), ("stride_cm", "stride_cn"))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[_row_goal("a_ptr", "b_ptr", same=("N", "K"), across=("BLOCK_M", "BLOCK_N"))],
    bounds=_INT32_OFFSETS,
)
@triton.jit(do_not_specialize=["M"], **_jit_options)
def mm_kernel(
    a_ptr, b_ptr, bias_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.dot(a, b, input_precision=DOT_PRECISION)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


# Relational contract: row x's fp32 partial of every split s equals the one-row launch's.  part is the
# [SPLIT_K, M, N] workspace seen as [SPLIT_K * M, N] with row stride N.
# Why: split s reduces k0 = s * K_PER_SPLIT, + BLOCK_K, ... < min((s + 1) * K_PER_SPLIT, K) in order;
# K_PER_SPLIT = cdiv(cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K and the config depend on (N, K) only.
@contract(
    params={"a_ptr": tensor(("M", "K"), ("stride_am", "stride_ak")),
            "b_ptr": tensor(("K", "N"), ("stride_bk", "stride_bn")),
            "part_ptr": tensor(("PR", "N"), ("N", 1))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "SPLIT_K"),
    verif=[goal("row_invariance", same=("N", "K", "K_PER_SPLIT"),
                pre=_ROW_PRE + ("L.a_ptr[x, :] == R.a_ptr[0, :]", "L.b_ptr[:, :] == R.b_ptr[:, :]"),
                post=("forall(s, 0 <= s < SPLIT_K, L.part_ptr[s * L.M + x, :] == R.part_ptr[s * R.M, :])",))],
    bounds=_INT32_OFFSETS[:2] + _INT32_OFFSETS[3:5] + _SPLIT_ROWS_INT32 + _SPLIT_WORKSPACE + (
        "K_PER_SPLIT == cdiv(cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K",),
    symbolic=("SPLIT_K",),
)
@triton.jit(do_not_specialize=["M"], **_jit_options)
def mm_splitk_partial_kernel(
    a_ptr, b_ptr, part_ptr,
    M, N, K, K_PER_SPLIT,
    stride_am, stride_ak, stride_bk, stride_bn,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    k_begin = pid_k * K_PER_SPLIT
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_begin, k_end, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < k_end
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.dot(a, b, input_precision=DOT_PRECISION)
    part_rows = pid_k * M + rows
    tl.store(part_ptr + part_rows[:, None] * N + cols[None, :], acc,
             mask=row_ok[:, None] & col_ok[None, :])


# Relational contract: equal partials of row x in every split give equal output rows.
# Why: c[x, n] = cast(((part[0] + part[1]) + ... + part[SPLIT_K - 1]) + bias[n]), summed in s order.
@contract(
    params={"part_ptr": tensor(("PR", "N"), ("N", 1)),
            "bias_ptr": tensor(("N",), (1,)),
            "c_ptr": tensor(("M", "N"), ("stride_cm", "stride_cn"))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[goal("row_invariance", same=("N",),
                pre=_ROW_PRE + ("forall(s, 0 <= s < SPLIT_K, L.part_ptr[s * L.M + x, :] == R.part_ptr[s * R.M, :])",
                                "L.bias_ptr[:] == R.bias_ptr[:]"),
                post=("L.c_ptr[x, :] == R.c_ptr[0, :]",))],
    bounds=(_INT32_OFFSETS[2], _INT32_OFFSETS[5]) + _SPLIT_ROWS_INT32,
)
@triton.jit(do_not_specialize=["M"])
def splitk_combine_kernel(
    part_ptr, bias_ptr, c_ptr,
    M, N,
    stride_cm, stride_cn,
    HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in range(0, SPLIT_K):
        part_rows = s * M + rows
        acc += tl.load(part_ptr + part_rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=mask)


# Relational contract: row x of an M-row launch equals the one-row launch's row.
# Why: one loop over k0 = 0, BLOCK_K, ... < K, as in mm_kernel; K_PER_SPLIT is a multiple of BLOCK_K, so
# split s owns the blocks k0 in [s * K_PER_SPLIT, (s + 1) * K_PER_SPLIT) and `ks < K` is its mask. acc
# restarts at 0 for every split and is added to total after the split's last block, so
# total = ((0 + acc_0) + acc_1) + ... (an empty split's +0 is skipped: x + 0 == x), then + bias, one
# cast. None of it sees M. One loop rather than a loop per split keeps the operand pipeline full
# across split boundaries.
# Cross-path claim (not proved by Z3, which compares two launches of one kernel): a row of this kernel
# equals, bit for bit, the same row of mm_splitk_partial_kernel + splitk_combine_kernel with the same
# BLOCK_K and K_PER_SPLIT, whatever BLOCK_M / BLOCK_N / warps / stages. On the interpreter this is
# checked by tests/test_ops_matmul_tall.py; whether Hopper's MMA gives every element the same bits in
# other tile shapes is checked by integration/gpu/tall_gemm_check.py, hence VOSTI_TALL_GEMM=0 to turn it off.
@contract(
    params={"a_ptr": tensor(("M", "K"), ("stride_am", "stride_ak")),
            "b_ptr": tensor(("K", "N"), ("stride_bk", "stride_bn")),
            "bias_ptr": tensor(("N",), (1,)),
            "c_ptr": tensor(("M", "N"), ("stride_cm", "stride_cn"))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[_row_goal("a_ptr", "b_ptr", same=("N", "K", "K_PER_SPLIT"))],
    bounds=_INT32_OFFSETS,
)
@triton.jit(do_not_specialize=["M"], **_jit_options)
def mm_tall_kernel(
    a_ptr, b_ptr, bias_ptr, c_ptr,
    M, N, K, K_PER_SPLIT,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.dot(a, b, input_precision=DOT_PRECISION)
        if ((k0 + BLOCK_K) % K_PER_SPLIT == 0) or (k0 + BLOCK_K >= K):  # the split's last block
            total += acc
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)
        total = total + bias.to(tl.float32)[None, :]
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
             total.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


# the TMA kernels' operands: a and W (row-major over K) through descriptors, bias and out through pointers
_TMA_PARAMS = {"a_desc": tensor_descriptor(("M", "K"), ("K", 1), ("BLOCK_M", "BLOCK_K")),
               "b_desc": tensor_descriptor(("N", "K"), ("K", 1), ("BLOCK_N", "BLOCK_K")),
               "bias_ptr": tensor(("N",), (1,)),
               "c_ptr": tensor(("M", "N"), ("stride_cm", "stride_cn"))}


# Tall TMA launches walk their tiles in groups of GROUP_M row tiles: program (i, n, g) computes row tile
# g * GROUP_M + i and column tile n, so the programs in flight (row tile fastest) share a column tile of W and a
# group's rows of a in L2. A launch of up to GROUP_M row tiles (2048 rows) runs the one-group order of a 2D grid;
# at 16384 rows, ungrouped, a's 128 MB went through L2 once per column tile: integration/gpu/tall_variants.py on
# the H100 (results/h100-s41) took 1.9-2.1x cuBLAS's time there, grouped by 8 1.1-1.3x, every row bit-equal.
TALL_GROUP_ROW_TILES = 16


# Relational contract: row x of an M-row launch equals the one-row launch's row (as mm_tall_kernel's).
# Why: row x is computed by program (x // BLOCK_M % GROUP_M, n, x // BLOCK_M // GROUP_M) (the witness);
# a_desc.load([pid_m * BLOCK_M, k0]) is rows pid_m * BLOCK_M + i of a at columns k0 + j, zero past M or K
# (TMA's fill); row x's accumulators run over s = 0 .. SPLIT_K - 1 and, in each, k0 = s * K_PER_SPLIT,
# + BLOCK_K, ... < min((s + 1) * K_PER_SPLIT, K) in order, none of which sees M. total = ((0 + acc_0) +
# acc_1) + ... as the combine kernel sums the partials (split 1: the one accumulator itself, like
# mm_kernel's), then + bias and one cast. Cross-path claim: as mm_tall_kernel's, checked on the GPU by
# integration/gpu/tall_gemm_check.py and tall_variants.py.
@contract(
    params=_TMA_PARAMS,
    grid=("min(GROUP_M, cdiv(M, BLOCK_M))", "cdiv(N, BLOCK_N)", "cdiv(cdiv(M, BLOCK_M), GROUP_M)"),
    verif=[_row_goal("a_desc", "b_desc", same=("N", "K", "K_PER_SPLIT"), witness={
        S: {"pid0": "e0 // BLOCK_M % GROUP_M", "pid1": "e1 // BLOCK_N", "pid2": "e0 // BLOCK_M // GROUP_M"}
        for S in "LR"})],
    bounds=_INT32_OFFSETS[2:3] + _INT32_OFFSETS[5:6],
)
@triton.jit(do_not_specialize=["M"], **_jit_options)
def mm_tall_tma_kernel(
    a_desc, b_desc, bias_ptr, c_ptr,
    M, N, K, K_PER_SPLIT,
    stride_cm, stride_cn,
    HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    SPLIT_K: tl.constexpr, GROUP_M: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    pid_m = tl.program_id(2) * GROUP_M + tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_M >= M:   # the last group's row tiles past M
        return
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if SPLIT_K == 1:
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([pid_m * BLOCK_M, k0])
            b = b_desc.load([pid_n * BLOCK_N, k0])
            total = tl.dot(a, b.T, total, input_precision=DOT_PRECISION)
    else:
        for s in range(0, SPLIT_K):  # a K loop per split keeps each one's TMA pipeline free of branches
            k_end = tl.minimum((s + 1) * K_PER_SPLIT, K)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(s * K_PER_SPLIT, k_end, BLOCK_K):
                a = a_desc.load([pid_m * BLOCK_M, k0])
                b = b_desc.load([pid_n * BLOCK_N, k0])
                acc = tl.dot(a, b.T, acc, input_precision=DOT_PRECISION)
            total += acc
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    if HAS_BIAS:
        bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)
        total = total + bias.to(tl.float32)[None, :]
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
             total.to(c_ptr.dtype.element_ty), mask=(rows < M)[:, None] & col_ok[None, :])


# Tall TMA launches of one accumulator a tile (split 1) take mm_tall_tma_cols_kernel for their whole chunks of
# COL_ROW_TILES row tiles (2048 rows): program (q, m) computes column tiles q, q + COL_PROGRAMS, ... of row tile m
# in 128 x 256 tiles, so a chunk's 128 programs run as one wave, each loading its next tile while it stores the
# last, and the programs in flight share COL_PROGRAMS column tiles of W in L2 (integration/gpu/tall_variants.py,
# `cols-pers` variants). Split tiles hold two accumulators, stay 128 x 128 and one program a tile.
TALL_COL_PROGRAMS = 8
TALL_COL_ROW_TILES = 16


# Relational contract: row x of an M-row launch equals the one-row launch's row (as mm_tall_tma_kernel's).
# Why: row x's column tile n is computed by program (n % COL_PROGRAMS, x // BLOCK_M) in its loop iteration
# tile_n = n (the witness); each tile's K loop runs k0 = 0, BLOCK_K, ... < K in order into one accumulator that
# starts at 0, none of which sees M; then + bias and one cast.
@contract(
    params=_TMA_PARAMS,
    grid=("COL_PROGRAMS", "cdiv(M, BLOCK_M)"),
    verif=[_row_goal("a_desc", "b_desc", same=("N", "K"), witness={
        S: {"pid0": "e1 // BLOCK_N % COL_PROGRAMS", "pid1": "e0 // BLOCK_M", "tile_n": "e1 // BLOCK_N"}
        for S in "LR"})],
    bounds=_INT32_OFFSETS[2:3] + _INT32_OFFSETS[5:6],
)
@triton.jit(do_not_specialize=["M"], **_jit_options)
def mm_tall_tma_cols_kernel(
    a_desc, b_desc, bias_ptr, c_ptr,
    M, N, K,
    stride_cm, stride_cn,
    HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    COL_PROGRAMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    pid_m = tl.program_id(1)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    for tile_n in tl.range(tl.program_id(0), tl.cdiv(N, BLOCK_N), COL_PROGRAMS, flatten=True):
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([pid_m * BLOCK_M, k0])
            b = b_desc.load([tile_n * BLOCK_N, k0])
            total = tl.dot(a, b.T, total, input_precision=DOT_PRECISION)
        cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        if HAS_BIAS:
            bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)
            total = total + bias.to(tl.float32)[None, :]
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
                 total.to(c_ptr.dtype.element_ty), mask=(rows < M)[:, None] & col_ok[None, :])


_COMBINE_BLOCK_M = 16
_COMBINE_BLOCK_N = 128
_SPLIT_WORKSPACE_ELEMS = 1 << 28  # 1 GiB of fp32 partials at most


def _dot_precision(dtype: torch.dtype) -> str:
    # fp32 must not silently become TF32 on GPU; 16-bit inputs use Triton's default.
    return "ieee" if dtype == torch.float32 else "tf32"


def _check_operands(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor) -> None:
    M, K = a.shape
    K2, N = b.shape
    if K2 != K:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"a and b must share a dtype, got {a.dtype} and {b.dtype}")
    if out.shape != (M, N):
        raise ValueError(f"out must be {(M, N)}, got {tuple(out.shape)}")
    if bias is not None and bias.shape != (N,):
        raise ValueError(f"bias must be ({N},), got {tuple(bias.shape)}")


def launch_matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None,
    out: torch.Tensor,
    config: MatmulConfig,
) -> torch.Tensor:
    """out[M, N] = a[M, K] @ b[K, N] (+ bias[N]) with the given config. Strided a, b, out are fine."""
    M, K = a.shape
    N = b.shape[1]
    _check_operands(a, b, bias, out)
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.copy_(bias.expand(M, N) if bias is not None else torch.zeros_like(out))
    if bias is not None and bias.stride(0) != 1:
        bias = bias.contiguous()
    precision = _dot_precision(a.dtype)
    tiles = (triton.cdiv(M, config.block_m), triton.cdiv(N, config.block_n))
    pdl = dependent_launch.enabled(out)
    if config.split_k == 1:
        guard.check(mm_kernel, tiles, HAS_BIAS=bias is not None, DOT_PRECISION=precision, BLOCK_M=config.block_m,
                    BLOCK_N=config.block_n, BLOCK_K=config.block_k)
        mm_kernel[tiles](
            a, b, bias if bias is not None else out, out,
            M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
            HAS_BIAS=bias is not None, DOT_PRECISION=precision,
            BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, PDL=pdl,
            num_warps=config.num_warps, num_stages=config.num_stages, launch_pdl=pdl,
        )
        return out
    # Rows are independent, so a tall GEMM runs in row chunks: the fp32 partials stay bounded and no
    # row's arithmetic changes (its chunk only decides which launch it is in).
    chunk = max(config.block_m, (_SPLIT_WORKSPACE_ELEMS // (config.split_k * N)) // config.block_m * config.block_m)
    part = torch.empty((config.split_k, min(M, chunk), N), device=a.device, dtype=torch.float32)
    for m0 in range(0, M, chunk):
        a_rows, out_rows = a[m0 : m0 + chunk], out[m0 : m0 + chunk]
        rows = a_rows.shape[0]
        guard.check(mm_splitk_partial_kernel, (triton.cdiv(rows, config.block_m), tiles[1], config.split_k),
                    DOT_PRECISION=precision, BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
                    SPLIT_K=config.split_k)
        mm_splitk_partial_kernel[(triton.cdiv(rows, config.block_m), tiles[1], config.split_k)](
            a_rows, b, part,
            rows, N, K, config.k_per_split(K),
            a_rows.stride(0), a_rows.stride(1), b.stride(0), b.stride(1),
            DOT_PRECISION=precision,
            BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, PDL=pdl,
            num_warps=config.num_warps, num_stages=config.num_stages, launch_pdl=pdl,
        )
        guard.check(splitk_combine_kernel, (triton.cdiv(rows, _COMBINE_BLOCK_M), triton.cdiv(N, _COMBINE_BLOCK_N)),
                    HAS_BIAS=bias is not None, SPLIT_K=config.split_k, BLOCK_M=_COMBINE_BLOCK_M,
                    BLOCK_N=_COMBINE_BLOCK_N)
        splitk_combine_kernel[(triton.cdiv(rows, _COMBINE_BLOCK_M), triton.cdiv(N, _COMBINE_BLOCK_N))](
            part, bias if bias is not None else out_rows, out_rows,
            rows, N, out_rows.stride(0), out_rows.stride(1),
            HAS_BIAS=bias is not None, SPLIT_K=config.split_k,
            BLOCK_M=_COMBINE_BLOCK_M, BLOCK_N=_COMBINE_BLOCK_N, PDL=pdl,
            num_warps=4, launch_pdl=pdl,
        )
    return out


def _tma_operands(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a [M, K] and b [K, N] (b = W^T of a row-major W [N, K]) can be read through TMA descriptors:
    both row-major over K, 16-byte aligned, on a GPU that has TMA (sm90+) or on the interpreter."""
    if not (a.is_contiguous() and b.t().is_contiguous()):
        return False
    if any(t.data_ptr() % 16 or (t.shape[-1] * t.element_size()) % 16 for t in (a, b.t())):
        return False
    return a.device.type == "cpu" or _has_tma(a.device.index if a.device.index is not None else
                                              torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _has_tma(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index)[0] >= 9


def launch_matmul_tma(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None,
    out: torch.Tensor,
    config: MatmulConfig,
) -> torch.Tensor:
    """launch_matmul's product through TMA descriptor loads: where `tma_cols_path` gives a config, whole chunks of
    TALL_COL_ROW_TILES row tiles by mm_tall_tma_cols_kernel in its tiles; the rest by mm_tall_tma_kernel (one
    program per tile, row tiles in groups of TALL_GROUP_ROW_TILES). a and b must pass `_tma_operands`."""
    M, K = a.shape
    N = b.shape[1]
    _check_operands(a, b, bias, out)
    if not _tma_operands(a, b):
        raise ValueError("launch_matmul_tma needs row-major, 16-byte aligned a and W = b^T on an sm90+ GPU")
    if M == 0 or N == 0 or K == 0:
        return launch_matmul(a, b, bias, out, config)
    if bias is not None and bias.stride(0) != 1:
        bias = bias.contiguous()
    cols = tma_cols_path(N, config, a.dtype)
    chunk = TALL_COL_ROW_TILES * config.block_m
    whole = M // chunk * chunk if cols is not None else 0
    for m0 in range(0, whole, chunk):
        _launch_tma_cols(a[m0:m0 + chunk], b, bias, out[m0:m0 + chunk], cols)
    if whole < M:
        _launch_tma_groups(a[whole:], b, bias, out[whole:], config)
    return out


def _launch_tma_cols(a, b, bias, out, config: MatmulConfig) -> None:
    grid = (TALL_COL_PROGRAMS, triton.cdiv(a.shape[0], config.block_m))
    _launch_tma_kernel(mm_tall_tma_cols_kernel, grid, a, b, bias, out, config, (), COL_PROGRAMS=TALL_COL_PROGRAMS)


def _launch_tma_groups(a, b, bias, out, config: MatmulConfig) -> None:
    row_tiles = triton.cdiv(a.shape[0], config.block_m)
    grid = (min(TALL_GROUP_ROW_TILES, row_tiles), triton.cdiv(b.shape[1], config.block_n),
            triton.cdiv(row_tiles, TALL_GROUP_ROW_TILES))
    _launch_tma_kernel(mm_tall_tma_kernel, grid, a, b, bias, out, config, (config.k_per_split(a.shape[1]),),
                       SPLIT_K=config.split_k, GROUP_M=TALL_GROUP_ROW_TILES)


def _launch_tma_kernel(kernel, grid, a, b, bias, out, config: MatmulConfig, k_args: tuple, **walk) -> None:
    """One checked launch of a TMA kernel: a and W = b^T through descriptors of the config's tiles; `k_args` follow
    (M, N, K) and `walk` holds the kernel's own constexprs."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    precision = _dot_precision(a.dtype)
    pdl = dependent_launch.enabled(out)
    tiles = dict(BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k)
    guard.check(kernel, grid, HAS_BIAS=bias is not None, DOT_PRECISION=precision, **walk, **tiles)
    kernel[grid](
        TensorDescriptor.from_tensor(a, [config.block_m, config.block_k]),
        TensorDescriptor.from_tensor(b.t(), [config.block_n, config.block_k]),
        bias if bias is not None else out, out,
        a.shape[0], b.shape[1], a.shape[1], *k_args, out.stride(0), out.stride(1),
        HAS_BIAS=bias is not None, DOT_PRECISION=precision, **walk, **tiles, PDL=pdl,
        num_warps=config.num_warps, num_stages=config.num_stages, launch_pdl=pdl,
    )


def launch_matmul_tall(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None,
    out: torch.Tensor,
    config: MatmulConfig,
) -> torch.Tensor:
    """launch_matmul's product in one launch: split 1 is mm_kernel with this config's tiles, split > 1
    is mm_tall_kernel (every split of a tile in one program, summed in split order)."""
    if config.split_k == 1:
        return launch_matmul(a, b, bias, out, config)
    M, K = a.shape
    N = b.shape[1]
    _check_operands(a, b, bias, out)
    if M == 0 or N == 0 or K == 0:
        return launch_matmul(a, b, bias, out, config)
    if bias is not None and bias.stride(0) != 1:
        bias = bias.contiguous()
    pdl = dependent_launch.enabled(out)
    guard.check(mm_tall_kernel, (triton.cdiv(M, config.block_m), triton.cdiv(N, config.block_n)),
                HAS_BIAS=bias is not None, DOT_PRECISION=_dot_precision(a.dtype), BLOCK_M=config.block_m,
                BLOCK_N=config.block_n, BLOCK_K=config.block_k)
    mm_tall_kernel[(triton.cdiv(M, config.block_m), triton.cdiv(N, config.block_n))](
        a, b, bias if bias is not None else out, out,
        M, N, K, config.k_per_split(K),
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        HAS_BIAS=bias is not None, DOT_PRECISION=_dot_precision(a.dtype),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, PDL=pdl,
        num_warps=config.num_warps, num_stages=config.num_stages, launch_pdl=pdl,
    )
    return out


def _on_interpreter(t: torch.Tensor) -> bool:
    return t.device.type == "cpu"


def _matmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None,
            out_dtype: torch.dtype | None = None) -> torch.Tensor:
    out_dtype = out_dtype or a.dtype
    kernel_out_dtype = out_dtype
    if _on_interpreter(a):
        if not interpreting():
            raise RuntimeError("vosti dense ops on CPU need TRITON_INTERPRET=1 set before triton is imported")
        # The interpreter is exact in fp32 only; 16-bit inputs are widened (an exact conversion).
        a, b = a.float(), b.float()
        bias = bias.float() if bias is not None else None
        kernel_out_dtype = torch.float32
    config = select_config(b.shape[1], b.shape[0], a.dtype)
    out = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=kernel_out_dtype)
    kernel, launch = launch_path(a.shape[0], config, a.dtype, operands=(a, b))
    _launcher(kernel)(a, b, bias, out, launch)
    return out if out.dtype == out_dtype else out.to(out_dtype)


def launch_path(M: int, config: MatmulConfig, dtype: torch.dtype,
                operands: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[str, MatmulConfig]:
    """(kernel, launch config) of an M-row GEMM whose decode config is `config`: "tma" or "tall" (the tall path),
    else "rows" (launch_matmul) in the mid tiles or the decode tiles. `operands` (a, b) decide whether the TMA
    kernel can read them (contiguous over K, 16-byte aligned); None assumes it can."""
    if tall_path_on(M, dtype):
        return _tall_path(config, dtype, operands)
    return "rows", mid_config(config) if mid_path_on(M) else config


def _tall_path(config: MatmulConfig, dtype: torch.dtype,
               operands: tuple[torch.Tensor, torch.Tensor] | None) -> tuple[str, MatmulConfig]:
    if tma_path_on() and (operands is None or _tma_operands(*operands)):
        return "tma", tma_config(config, dtype)
    return "tall", tall_config(config, dtype)


def launch_tall(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
                config: MatmulConfig) -> torch.Tensor:
    """The tall path's launch of the decode config `config`, as a tall GEMM takes it: the TMA kernel where it
    is on and the operands allow it, else the pointer kernels' tall tiles."""
    kernel, launch = _tall_path(config, a.dtype, (a, b))
    return _launcher(kernel)(a, b, bias, out, launch)


_LAUNCHERS = {"tma": "launch_matmul_tma", "tall": "launch_matmul_tall", "rows": "launch_matmul"}


def _launcher(kernel: str):
    return globals()[_LAUNCHERS[kernel]]   # by name, so a wrapper set on the module sees every launch


def mm(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """a[M, K] @ b[K, N], batch invariant; the fp32 accumulator is rounded once, to out_dtype."""
    return _matmul(a, b, None, out_dtype)


def addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """bias[N] + a[M, K] @ b[K, N], batch invariant (bias added once, after the K reduction)."""
    return _matmul(a, b, bias)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x[..., K] @ weight[N, K]^T + bias[N], batch invariant over all leading dims of x."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    y = _matmul(x2, weight.t(), bias)
    return y.reshape(*lead, weight.shape[0])


def verifier_catalog() -> list[dict]:
    """The verifier's catalog of this module: every constexpr config the launch paths can run (the
    per-shape CATALOG, the rule's configs, their mid-row tiles and the tall path of each), per kernel."""
    cfgs = [(cfg, getattr(torch, dt)) for (_n, _k, dt), cfg in CATALOG.items()]
    cfgs += [(rule_config(4096, 4096, torch.float32), torch.float32)]
    cfgs += [pair for pair in rule_configs() if pair not in cfgs]
    mids = _unique([(mid_config(cfg), dtype) for cfg, dtype in cfgs if mid_config(cfg) != cfg])
    plain, split, tall, tma, cols = [], [], [], [], []
    for cfg, dtype in cfgs + mids + [(tall_config(cfg, dtype), dtype) for cfg, dtype in cfgs]:
        fam = dataclasses.asdict(cfg)
        base = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k,
                "DOT_PRECISION": _dot_precision(dtype)}
        if cfg.split_k == 1:
            plain += [({**base, "HAS_BIAS": hb}, fam) for hb in (False, True)]
        elif (cfg, dtype) in cfgs or (cfg, dtype) in mids:
            split.append(({**base, "SPLIT_K": cfg.split_k}, fam))
        else:  # the tall path of a split config: one program per tile sums its splits
            tall += [({**base, "HAS_BIAS": hb}, fam) for hb in (False, True)]
    for cfg, dtype in [(tma_config(cfg, dtype), dtype) for cfg, dtype in cfgs]:
        base = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k,
                "DOT_PRECISION": _dot_precision(dtype), "SPLIT_K": cfg.split_k, "GROUP_M": TALL_GROUP_ROW_TILES}
        tma += [({**base, "HAS_BIAS": hb}, dataclasses.asdict(cfg)) for hb in (False, True)]
        if cfg.split_k == 1:
            wide = tma_cols_config(cfg, dtype)
            cols += [({"BLOCK_M": wide.block_m, "BLOCK_N": wide.block_n, "BLOCK_K": wide.block_k,
                       "DOT_PRECISION": _dot_precision(dtype), "COL_PROGRAMS": TALL_COL_PROGRAMS, "HAS_BIAS": hb},
                      dataclasses.asdict(wide)) for hb in (False, True)]
    combine = [({"HAS_BIAS": hb, "SPLIT_K": c["SPLIT_K"], "BLOCK_M": _COMBINE_BLOCK_M, "BLOCK_N": _COMBINE_BLOCK_N},
                fam) for c, fam in split for hb in (False, True)]
    # a split-1 config's tall and mid launches are mm_kernel again with bigger tiles: their rows against the
    # decode tiles'
    cross = _unique([({**c, "BLOCK_M": t.block_m, "BLOCK_N": t.block_n}, c, dataclasses.asdict(t))
                     for cfg, dtype in cfgs if cfg.split_k == 1
                     for t in (tall_config(cfg, dtype), mid_config(cfg))
                     if (t.block_m, t.block_n) != (cfg.block_m, cfg.block_n)
                     for c, _fam in plain if c["BLOCK_M"] == cfg.block_m and c["BLOCK_N"] == cfg.block_n
                     and c["BLOCK_K"] == cfg.block_k and c["DOT_PRECISION"] == _dot_precision(dtype)])
    entries = [{"family": "matmul", "kernel": k, "configs": _unique(c)} for k, c in (
        (mm_kernel, plain), (mm_splitk_partial_kernel, split), (mm_tall_kernel, tall), (mm_tall_tma_kernel, tma),
        (mm_tall_tma_cols_kernel, cols),
        (splitk_combine_kernel, combine))]
    entries[0]["cross"] = cross
    return entries


def _unique(pairs: list) -> list:
    out: list = []
    for p in pairs:
        if p not in out:
            out.append(p)
    return out
