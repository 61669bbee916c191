"""Prefill GEMM kernel variants on a CUDA GPU: which keeps the decode path's bits and how close it gets to cuBLAS.

    python integration/gpu/tall_variants.py --out $OUT/tall_variants.json [--budget-s 240]
    python integration/gpu/tall_variants.py --cpu-smoke --out /tmp/tv.json     # logic check, no GPU

Every variant reduces each split's K blocks in order into an accumulator that starts at 0, adds the splits in
order (split 1: the accumulator is stored as it is), like the decode path (`ops.matmul.launch_matmul`). What
differs is what the decode contract does not fix: tile sizes, block_k (a multiple of the split length; the MMA
chain on Hopper accumulates K steps in one order whatever block_k is, which the bits section checks), program
order (GROUP_M groups of row tiles share a column tile in L2), loop structure (one pipelined K loop per split)
and loads (pointers or TMA descriptors). Each variant's rows are compared bit for bit with the decode path's at
every M; a variant that differs is reported and not timed. Timing: triton.testing.do_bench (L2 flushed).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

if "--cpu-smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from integration.gpu.dense_bench import Report, device_ready  # noqa: E402

SHAPES = {  # (N, K) -> GEMMs
    (6144, 4096): "llama qkv", (4096, 4096): "llama o", (28672, 4096): "llama gate_up", (4096, 14336): "llama down",
    (4096, 2560): "gemma qkv", (2560, 2048): "gemma o", (20480, 2560): "gemma gate_up", (2560, 10240): "gemma down",
}
M_VALUES = (1024, 4096)
DTYPE = torch.bfloat16
DEVICE = "cuda"
# name: (loads, GROUP_M, BLOCK_M, BLOCK_N, BLOCK_K, warps, stages); BLOCK_N 256 only without a split
VARIANTS = {
    "tma g8 128x128x64 s4": ("tma", 8, 128, 128, 64, 8, 4),
    "tma g8 128x256x64 s3": ("tma", 8, 128, 256, 64, 8, 3),
    # persistent: one program per SM walks tiles start, start + SMs, ...; each tile's K order is the decode path's
    "pers g8 128x128x64 s4": ("pers", 8, 128, 128, 64, 8, 4),
    "pers-flat g8 128x128x64 s4": ("pers-flat", 8, 128, 128, 64, 8, 4),
    "pers-flat g8 128x256x64 s3": ("pers-flat", 8, 128, 256, 64, 8, 3),
    "pers-ws g8 128x128x64 s4": ("pers-ws", 8, 128, 128, 64, 8, 4),
    "pers-ws g8 128x256x64 s3": ("pers-ws", 8, 128, 256, 64, 8, 3),
    "pers-tmastore g8 128x128x64 s4": ("pers-flat-cdesc", 8, 128, 128, 64, 8, 4),
    "pers-tmastore g8 128x256x64 s3": ("pers-flat-cdesc", 8, 128, 256, 64, 8, 3),
    # persistent along rows only: program (p, n) walks row tiles p, p + P, ... of column tile n (P x column tiles
    # about one wave); its writer of a row is linear in the program ids, so the verifier proves it today with a
    # witness (the tile loop over any M is what `pers` lacks)
    "rows-pers 128x128x64 s4": ("rows-pers", 0, 128, 128, 64, 8, 4),
    "rows-pers 128x256x64 s3": ("rows-pers", 0, 128, 256, 64, 8, 3),
    # persistent along columns: program (q, m) walks column tiles q, q + Q, ... of row tile m (Q = SMs // row
    # tiles), so the programs in flight share a few column tiles of W; linear in the program ids like rows-pers.
    # "chunked": launches of at most 2048 rows (16 row tiles) each
    "cols-pers 128x256x64 s3": ("cols-pers", 0, 128, 256, 64, 8, 3),
    "cols-pers 128x128x64 s4": ("cols-pers", 0, 128, 128, 64, 8, 4),
    "cols-pers chunked 128x256x64 s3": ("cols-pers-chunked", 0, 128, 256, 64, 8, 3),
    "cols-pers chunked 128x128x64 s4": ("cols-pers-chunked", 0, 128, 128, 64, 8, 4),
    "cols-pers tmastore 128x256x64 s3": ("cols-pers-cdesc", 0, 128, 256, 64, 8, 3),
}
CONTROL = ("ptr", 0, 128, 128, 64, 8, 3)  # run with split 1 on split shapes: other partial-sum boundaries must differ


@triton.jit
def _tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    if GROUP_M == 0:
        pid_m = pid % num_m
        pid_n = pid // num_m
    else:
        per_group = GROUP_M * num_n
        first_m = (pid // per_group) * GROUP_M
        size_m = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % size_m
        pid_n = (pid % per_group) // size_m
    return pid_m, pid_n


@triton.jit
def ptr_kernel(a_ptr, w_ptr, c_ptr, M, N, K, K_PER_SPLIT, stride_am, stride_wn, stride_cm,
               NUM_SPLITS: tl.constexpr, GROUP_M: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_in = rows % M  # rows past M read row (x mod M); their results are never stored
    cols_in = cols % N
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in tl.static_range(NUM_SPLITS):
        k_end = tl.minimum((s + 1) * K_PER_SPLIT, K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(s * K_PER_SPLIT, k_end, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + rows_in[:, None] * stride_am + ks[None, :], mask=ks[None, :] < k_end, other=0.0)
            w = tl.load(w_ptr + cols_in[None, :] * stride_wn + ks[:, None], mask=ks[:, None] < k_end, other=0.0)
            acc = tl.dot(a, w, acc)
        if NUM_SPLITS == 1:
            total = acc
        else:
            total += acc
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], total.to(c_ptr.dtype.element_ty),
             mask=(rows < M)[:, None] & (cols < N)[None, :])

@triton.jit
def tma_kernel(a_desc, w_desc, c_ptr, M, N, K, K_PER_SPLIT, stride_cm,
               NUM_SPLITS: tl.constexpr, GROUP_M: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in tl.static_range(NUM_SPLITS):
        k_end = tl.minimum((s + 1) * K_PER_SPLIT, K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(s * K_PER_SPLIT, k_end, BLOCK_K):  # K_PER_SPLIT % BLOCK_K == 0: only K's end is ragged
            a = a_desc.load([pid_m * BLOCK_M, k0])
            w = w_desc.load([pid_n * BLOCK_N, k0])
            acc = tl.dot(a, w.T, acc)
        if NUM_SPLITS == 1:
            total = acc
        else:
            total += acc
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], total.to(c_ptr.dtype.element_ty),
             mask=(rows < M)[:, None] & (cols < N)[None, :])


@triton.jit
def _split_sums_one_loop(a_desc, w_desc, pid_m, pid_n, K, K_PER_SPLIT,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """A tile's sum of split partials in one K loop that closes a split at its last block."""
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k0])
        w = w_desc.load([pid_n * BLOCK_N, k0])
        acc = tl.dot(a, w.T, acc)
        if ((k0 + BLOCK_K) % K_PER_SPLIT == 0) or (k0 + BLOCK_K >= K):
            total += acc
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    return total


@triton.jit
def persistent_kernel(a_desc, w_desc, c_ptr, c_desc, M, N, K, K_PER_SPLIT, stride_cm,
                      NUM_SPLITS: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                      FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, C_DESC: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Program p computes tiles p, p + NUM_PROGRAMS, ...; a split closes at its last K block (one K loop)."""
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if NUM_SPLITS == 1:
            for k0 in range(0, K, BLOCK_K):
                a = a_desc.load([pid_m * BLOCK_M, k0])
                w = w_desc.load([pid_n * BLOCK_N, k0])
                acc = tl.dot(a, w.T, acc)
            total = acc
        else:
            total = _split_sums_one_loop(a_desc, w_desc, pid_m, pid_n, K, K_PER_SPLIT, BLOCK_M, BLOCK_N, BLOCK_K)
        if C_DESC:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], total.to(c_desc.dtype))
        else:
            rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], total.to(c_ptr.dtype.element_ty),
                     mask=(rows < M)[:, None] & (cols < N)[None, :])


@triton.jit
def row_persistent_kernel(a_desc, w_desc, c_ptr, M, N, K, K_PER_SPLIT, stride_cm,
                          NUM_SPLITS: tl.constexpr, ROW_PROGRAMS: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Program (p, n) computes row tiles p, p + ROW_PROGRAMS, ... of column tile n."""
    pid_n = tl.program_id(1)
    for tile_m in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M), ROW_PROGRAMS, flatten=True):
        if NUM_SPLITS == 1:
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                a = a_desc.load([tile_m * BLOCK_M, k0])
                w = w_desc.load([pid_n * BLOCK_N, k0])
                total = tl.dot(a, w.T, total)
        else:
            total = _split_sums_one_loop(a_desc, w_desc, tile_m, pid_n, K, K_PER_SPLIT, BLOCK_M, BLOCK_N, BLOCK_K)
        rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], total.to(c_ptr.dtype.element_ty),
                 mask=(rows < M)[:, None] & (cols < N)[None, :])


@triton.jit
def col_persistent_kernel(a_desc, w_desc, c_ptr, c_desc, M, N, K, K_PER_SPLIT, stride_cm,
                          NUM_SPLITS: tl.constexpr, COL_PROGRAMS: tl.constexpr, C_DESC: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Program (q, m) computes column tiles q, q + COL_PROGRAMS, ... of row tile m."""
    pid_m = tl.program_id(1)
    for tile_n in tl.range(tl.program_id(0), tl.cdiv(N, BLOCK_N), COL_PROGRAMS, flatten=True):
        if NUM_SPLITS == 1:
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                a = a_desc.load([pid_m * BLOCK_M, k0])
                w = w_desc.load([tile_n * BLOCK_N, k0])
                total = tl.dot(a, w.T, total)
        else:
            total = _split_sums_one_loop(a_desc, w_desc, pid_m, tile_n, K, K_PER_SPLIT, BLOCK_M, BLOCK_N, BLOCK_K)
        if C_DESC:
            c_desc.store([pid_m * BLOCK_M, tile_n * BLOCK_N], total.to(c_desc.dtype))
        else:
            rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
            cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
            tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], total.to(c_ptr.dtype.element_ty),
                     mask=(rows < M)[:, None] & (cols < N)[None, :])


def _col_persistent_launch(a, w, out, cfg, kps, bm, bn, bk, warps, stages, c_desc_store, chunk_rows):
    from triton.tools.tensor_descriptor import TensorDescriptor

    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 2
    M, K = a.shape
    N = w.shape[0]
    launches = []
    w_desc = TensorDescriptor.from_tensor(w, [bn, bk])
    for m0 in range(0, M, chunk_rows or M):
        rows = a[m0:m0 + (chunk_rows or M)]
        c_rows = out[m0:m0 + rows.shape[0]]
        row_tiles = triton.cdiv(rows.shape[0], bm)
        programs = max(1, min(triton.cdiv(N, bn), sms // row_tiles))
        launches.append(((programs, row_tiles), TensorDescriptor.from_tensor(rows, [bm, bk]), c_rows,
                         TensorDescriptor.from_tensor(c_rows, [bm, bn]) if c_desc_store else None, programs))
    meta = dict(NUM_SPLITS=cfg.split_k, C_DESC=c_desc_store, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                num_warps=warps, num_stages=stages)

    def launch():
        for grid, a_desc, c_rows, c_desc, programs in launches:
            col_persistent_kernel[grid](a_desc, w_desc, c_rows, c_desc, c_rows.shape[0], N, K, kps,
                                        c_rows.stride(0), COL_PROGRAMS=programs, **meta)
    return launch


def _launcher(variant, cfg, a, w, out):
    """A no-argument launch of `variant` computing out = a @ w^T with cfg's K order (None if it cannot apply)."""
    loads, group_m, bm, bn, bk, warps, stages = variant
    M, K = a.shape
    N = w.shape[0]
    kps = cfg.k_per_split(K)
    if kps % bk or (bm * bn > 128 * 128 and cfg.split_k > 1):
        return None
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    meta = dict(NUM_SPLITS=cfg.split_k, GROUP_M=group_m, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                num_warps=warps, num_stages=stages)
    if loads == "ptr":
        return lambda: ptr_kernel[grid](a, w, out, M, N, K, kps, a.stride(0), w.stride(0), out.stride(0), **meta)
    from triton.tools.tensor_descriptor import TensorDescriptor

    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    w_desc = TensorDescriptor.from_tensor(w, [bn, bk])
    if loads.startswith("cols-pers"):
        return _col_persistent_launch(a, w, out, cfg, kps, bm, bn, bk, warps, stages, "cdesc" in loads,
                                      2048 if "chunked" in loads else 0)
    if loads == "rows-pers":
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 2
        row_tiles, col_tiles = triton.cdiv(M, bm), triton.cdiv(N, bn)
        programs = max(1, min(row_tiles, sms // col_tiles))
        meta = dict(NUM_SPLITS=cfg.split_k, ROW_PROGRAMS=programs, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                    num_warps=warps, num_stages=stages)
        return lambda: row_persistent_kernel[(programs, col_tiles)](a_desc, w_desc, out, M, N, K, kps,
                                                                    out.stride(0), **meta)
    if loads.startswith("pers"):
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 2
        programs = min(sms, grid[0])
        c_desc = TensorDescriptor.from_tensor(out, [bm, bn]) if "cdesc" in loads else None
        meta.update(NUM_PROGRAMS=programs, FLATTEN="flat" in loads, WARP_SPECIALIZE="ws" in loads,
                    C_DESC=c_desc is not None)
        return lambda: persistent_kernel[(programs,)](a_desc, w_desc, out, c_desc, M, N, K, kps, out.stride(0),
                                                      **meta)
    return lambda: tma_kernel[grid](a_desc, w_desc, out, M, N, K, kps, out.stride(0), **meta)


def _config(N: int, K: int):
    from vosti_plugin.ops import matmul

    return matmul.select_config(N, K, DTYPE)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8).reshape(t.shape[0], -1)


def _time_us(fn) -> float:
    if DEVICE == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    return triton.testing.do_bench(fn, warmup=10, rep=60) * 1000.0


def run(report: Report, deadline: float) -> bool:
    from vosti_plugin.ops import matmul

    gen = torch.Generator(device=DEVICE).manual_seed(0)
    rows, failures = [], []
    names = list(VARIANTS)
    print(f"{'gemm':16s} {'M':>5s} {'split':>5s} {'plugin':>8s} {'p-tma':>8s} {'p-grp':>8s} {'cuBLAS':>8s} " + " ".join(f"{n[:22]:>22s}" for n in names))
    for (N, K), gemm in SHAPES.items():
        cfg = _config(N, K)
        w = (torch.randn(N, K, generator=gen, device=DEVICE) / math.sqrt(K)).to(DTYPE)
        for M in M_VALUES:
            if time.time() > deadline:
                report.data["incomplete"] = True
                print("stopped: time budget spent", flush=True)
                return not failures
            a = torch.randn(M, K, generator=gen, device=DEVICE).to(DTYPE)
            ref = matmul.launch_matmul(a, w.t(), None, torch.empty(M, N, device=DEVICE, dtype=DTYPE), cfg)
            tall_out = torch.empty_like(ref)
            tall_cfg = matmul.tall_config(cfg, DTYPE)
            plugin = lambda: matmul.launch_matmul_tall(a, w.t(), None, tall_out, tall_cfg)  # noqa: E731
            plugin()
            row = {"gemm": gemm, "N": N, "K": K, "M": M, "split": cfg.split_k, "block_k": cfg.block_k,
                   "plugin_us": _time_us(plugin), "plugin_bits_equal": bool(torch.equal(_bits(tall_out), _bits(ref))),
                   "cublas_us": _time_us(lambda: torch.matmul(a, w.t())), "variants": {}}
            if DEVICE != "cpu":  # the plugin's TMA kernel (VOSTI_TMA_GEMM=1)
                tma_cfg = matmul.tma_config(cfg, DTYPE)
                tma = lambda: matmul.launch_matmul_tma(a, w.t(), None, tall_out, tma_cfg)  # noqa: E731
                tma()
                row["plugin_tma_us"] = _time_us(tma)
                row["plugin_tma_bits_equal"] = bool(torch.equal(_bits(tall_out), _bits(ref)))
                if not row["plugin_tma_bits_equal"]:
                    failures.append(f"{gemm} M={M}: launch_matmul_tma differs from the decode path")
                os.environ["VOSTI_TMA_COLS_GEMM"] = "0"   # one program a tile throughout
                try:
                    tall_out.zero_()
                    tma()
                    row["plugin_tma_groups_us"] = _time_us(tma)
                    if not torch.equal(_bits(tall_out), _bits(ref)):
                        failures.append(f"{gemm} M={M}: launch_matmul_tma without the column walk differs")
                finally:
                    del os.environ["VOSTI_TMA_COLS_GEMM"]
            for name in names:
                out = torch.empty_like(ref)
                try:
                    fn = _launcher(VARIANTS[name], cfg, a, w, out)
                    if fn is None:
                        continue
                    fn()
                    bad = int((~(_bits(out) == _bits(ref)).all(dim=1)).sum())
                    entry = {"bad_rows": bad}
                    if bad:
                        failures.append(f"{gemm} M={M} {name}: {bad}/{M} rows differ from the decode path")
                    else:
                        entry["us"] = _time_us(fn)
                except Exception as exc:  # a config that does not compile or fit is recorded; the rest still run
                    entry = {"error": repr(exc)[:240]}
                row["variants"][name] = entry
            if cfg.split_k > 1:  # the comparison can fail: one split instead of cfg's changes the sums' order
                out = torch.empty_like(ref)
                control = CONTROL if DEVICE != "cpu" else next(iter(VARIANTS.values()))
                _launcher(control, dataclasses.replace(cfg, split_k=1), a, w, out)()
                row["control_bad_rows"] = int((~(_bits(out) == _bits(ref)).all(dim=1)).sum())
                if not row["control_bad_rows"]:
                    failures.append(f"{gemm} M={M}: the one-split control gave the split path's bits")
            rows.append(row)
            report.put("rows", rows)
            report.put("failures", failures)
            cells = []
            for name in names:
                e = row["variants"].get(name)
                cells.append("—" if e is None else "ERR" if "error" in e else f"DIFF {e['bad_rows']}"
                             if e["bad_rows"] else f"{e['us']:.0f} ({e['us'] / row['cublas_us']:.2f}x)")
            print(f"{gemm:16s} {M:5d} {cfg.split_k:5d} {row['plugin_us']:8.0f} {row.get('plugin_tma_us', 0):8.0f} "
                  f"{row.get('plugin_tma_groups_us', 0):8.0f} "
                  f"{row['cublas_us']:8.0f} "
                  + " ".join(f"{c:>22s}" for c in cells), flush=True)
            del a, ref
    return not failures


def _use_cpu_smoke() -> None:
    """Tiny fp32 shapes through the Triton interpreter, with a split config (the CPU catalog has none)."""
    global SHAPES, M_VALUES, DTYPE, DEVICE, VARIANTS, _config
    from vosti_plugin.ops.matmul import MatmulConfig
    SHAPES = {(96, 256): "tiny split", (160, 64): "tiny"}
    M_VALUES = (40,)
    DTYPE, DEVICE = torch.float32, "cpu"
    VARIANTS = {"ptr 2d 32x32x32": ("ptr", 0, 32, 32, 32, 4, 1), "ptr g2 16x32x32": ("ptr", 2, 16, 32, 32, 4, 1),
                "pers g2 16x32x32": ("pers-flat-cdesc", 2, 16, 32, 32, 4, 1),
                "rows-pers 16x32x32": ("rows-pers", 0, 16, 32, 32, 4, 1),
                "cols-pers 16x32x32": ("cols-pers", 0, 16, 32, 32, 4, 1)}
    _config = lambda N, K: MatmulConfig(block_m=16, block_n=32, block_k=32, split_k=3 if K >= 96 else 1,  # noqa: E731
                                        num_stages=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("--m", default="", help="activation rows, comma-separated (default: 1024,4096)")
    ap.add_argument("--variants", default="", help="comma-separated variant names to run (default: all)")
    ap.add_argument("--cpu-smoke", action="store_true")
    args = ap.parse_args()
    global M_VALUES, VARIANTS
    if args.m and not args.cpu_smoke:
        M_VALUES = tuple(int(m) for m in args.m.split(","))
    if args.variants and not args.cpu_smoke:
        unknown = [n for n in args.variants.split(",") if n not in VARIANTS]
        if unknown:
            ap.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
        VARIANTS = {n: VARIANTS[n] for n in args.variants.split(",")}
    if not device_ready(args.cpu_smoke, _use_cpu_smoke):
        return 1
    report = Report(args.out)
    ok = run(report, time.time() + args.budget_s)
    print("VARIANT BITS:", "PASS" if ok else "FAIL (see failures)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
