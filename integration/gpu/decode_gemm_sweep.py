"""Decode GEMM launch configs swept over every served geometry's layer shapes, on a CUDA GPU (#18, #20).

    python integration/gpu/decode_gemm_sweep.py --out DIR [--m 1,4,16] [--shapes N:K,...] [--budget-s 480]
    python integration/gpu/decode_gemm_sweep.py --out DIR --small-mb 32   # small weights, any program count

For each distinct (N, K) of the per-layer GEMMs (qkv, o, gate_up, down) of vosti_plugin.integration.geometries,
times vosti's GEMM (`launch_matmul`) in bf16 at decode batch M under each candidate config (BLOCK_M 64, the
wgmma tile the tall prefill path shares; BLOCK_N, BLOCK_K, split count, stages), the config the shipped
rule selects, and cuBLAS. A config is a function of (N, K) only, so whichever wins here keeps every row's
bits independent of M; the rule that picks it is written afterwards from this data (no autotuning at run
time). Timer: dense_bench's (CUDA graphs over rotating weight copies larger than L2), best of 2 replays. Writes
DIR/decode_gemm_sweep.json (one row per shape x config: µs per M) and prints the best config per shape.

--block-m 16,64 adds activation tiles of 16 rows (mma.sync; a third CTA per SM fits in shared memory) and
compares each such config's rows with the tall path's too.

--paths (with e.g. --m 32,64,128,256,384,511) times the shipped config through each launch path a GEMM of M rows
could take instead of sweeping configs: the decode tiles, the mid tiles (VOSTI_MID_GEMM's `mid_config`), the tall
path (`launch_tall`) and cuBLAS, and checks the mid and tall rows against the decode rows bit for bit; it writes
DIR/decode_gemm_paths.json and prints, per M, each path's time over the decode tiles' and cuBLAS's (geometric
means): the data for MID_MIN_ROWS and TALL_MIN_ROWS.

--small-mb X sweeps only the shapes whose weight is at most X MB, with narrow column tiles (16, 32) and no
lower bound on the program count: a small weight is read in launch and memory latency, so what counts is how
many programs share it and whether a second launch (the split-K combine) follows. Each of those configs' rows
is also compared bit for bit with the tall TMA path's rows of the same inputs (512 rows, `tma_config` of the
config), since a decode row must equal its prefill row.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from integration.gpu import dense_bench  # noqa: E402
from integration.gpu.geometry_gemm_floor import layer_shapes  # noqa: E402
from vosti_plugin.integration.geometries import GEOMETRIES  # noqa: E402

HBM_BYTES_PER_S = 4.3e12
L2_ROTATION_BYTES = 160e6  # weight copies cycled per graph: well past the H200's 50 MB L2
SMEM_BYTES = 200_000


def shapes() -> list[tuple[int, int]]:
    out = set()
    for config in GEOMETRIES.values():
        for gemm, nk in layer_shapes(config).items():
            if gemm != "lm_head":
                out.add(nk)
    return sorted(out)


def _configs(N: int, K: int, block_ns, block_ks, splits, min_k: int, programs_ok, block_ms=(64,)) -> list:
    """Configs with 4 warps whose split keeps at least min_k (and block_k) of K per split, whose program count
    passes programs_ok, and whose operand stages fit in shared memory."""
    from vosti_plugin.ops.matmul import MatmulConfig

    return [MatmulConfig(block_m=bm, block_n=bn, block_k=bk, split_k=split, num_warps=4, num_stages=stages)
            for bm in block_ms for bn in block_ns for bk in block_ks for split in splits
            if K // split >= max(min_k, bk) and programs_ok(math.ceil(N / bn) * split)
            for stages in (3, 4, 5) if (stages < 5 or bm < 64) and bk * (bm + bn) * 2 * stages <= SMEM_BYTES]


def candidates(N: int, K: int, block_ms=(64,)):
    return _configs(N, K, (32, 64, 128), (64, 128), (1, 2, 4, 8, 16), 256, lambda p: 128 <= p <= 1100, block_ms)


def small_candidates(N: int, K: int, block_ms=(64,)):
    return _configs(N, K, (16, 32, 64, 128), (64, 128, 256), (1, 2, 4, 8), 128, lambda p: p <= 1200, block_ms)


def rows_equal_tall(w, cfg) -> bool:
    """Whether cfg's rows (a 16-row launch) equal the tall TMA path's rows of the same inputs, bit for bit."""
    from vosti_plugin.ops import matmul

    N, K = w.shape[1], w.shape[0]
    x = torch.randn(matmul.TALL_MIN_ROWS, K, device="cuda").bfloat16()
    tall = torch.empty(x.shape[0], N, device="cuda", dtype=torch.bfloat16)
    matmul.launch_matmul_tma(x, w, None, tall, matmul.tma_config(cfg, torch.bfloat16))
    short = torch.empty(16, N, device="cuda", dtype=torch.bfloat16)
    matmul.launch_matmul(x[:16], w, None, short, cfg)
    return torch.equal(tall[:16].view(torch.int16), short.view(torch.int16))


def _bench_operands(N: int, K: int, ms: list[int]):
    """Weight copies past L2 (weight[N, K].t(), as vLLM's linear launches it), and an activation and output per M."""
    n = max(1, math.ceil(L2_ROTATION_BYTES / (N * K * 2)))
    ws = [(torch.randn(N, K, device="cuda") / math.sqrt(K)).bfloat16().t() for _ in range(n)]
    xs = {M: torch.randn(M, K, device="cuda").bfloat16() for M in ms}
    outs = {M: torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for M in ms}
    return n, ws, xs, outs


def sweep_shape(N: int, K: int, ms: list[int], small: bool = False, block_ms=(64,)) -> dict:
    from vosti_plugin.ops import matmul

    wbytes = N * K * 2
    n, ws, xs, outs = _bench_operands(N, K, ms)
    shipped = matmul.select_config(N, K, torch.bfloat16)
    rows = []
    timed = dense_bench._graph_time_us
    cublas = {M: timed(lambda i, M=M: torch.matmul(xs[M], ws[i], out=outs[M]), n, reps=2) for M in ms}
    pool = small_candidates(N, K, block_ms) if small else candidates(N, K, block_ms)
    for cfg in [shipped] + [c for c in pool if c != shipped]:
        us: dict = {}
        row: dict = {"config": vars(cfg), "shipped": cfg == shipped}
        try:
            for M in ms:
                us[M] = timed(lambda i, M=M, cfg=cfg: matmul.launch_matmul(xs[M], ws[i], None, outs[M], cfg), n,
                              reps=2)
            if small or cfg.block_m != 64:
                row["bits_equal_tall"] = rows_equal_tall(ws[0], cfg)
        except Exception as exc:  # noqa: BLE001 - a config that does not compile or fit is data too
            us = {"error": repr(exc)[:160]}
        rows.append({**row, "us": us})
    del ws
    torch.cuda.empty_cache()
    floor = wbytes / HBM_BYTES_PER_S * 1e6
    return {"N": N, "K": K, "floor_us": floor, "cublas_us": cublas, "rows": rows}


PATHS = ("decode", "mid", "tall")


def time_paths(N: int, K: int, ms: list[int]) -> dict:
    """The shipped config of (N, K) at each M through the decode tiles, the mid tiles and the tall path, with
    cuBLAS; the mid and tall rows of a 512-row input against its first 16 rows decoded."""
    from vosti_plugin.ops import matmul

    n, ws, xs, outs = _bench_operands(N, K, ms)
    config = matmul.select_config(N, K, torch.bfloat16)
    launch = {"decode": lambda x, w, out: matmul.launch_matmul(x, w, None, out, config),
              "mid": lambda x, w, out: matmul.launch_matmul(x, w, None, out, matmul.mid_config(config)),
              "tall": lambda x, w, out: matmul.launch_tall(x, w, None, out, config)}
    timed = dense_bench._graph_time_us
    us = {"cublas": {M: timed(lambda i, M=M: torch.matmul(xs[M], ws[i], out=outs[M]), n, reps=2) for M in ms}}
    for path in PATHS:
        us[path] = {M: timed(lambda i, M=M, f=launch[path]: f(xs[M], ws[i], outs[M]), n, reps=2) for M in ms}
    x = torch.randn(matmul.TALL_MIN_ROWS, K, device="cuda").bfloat16()
    rows = {}
    for path in PATHS:
        rows[path] = torch.empty(x.shape[0] if path != "decode" else 16, N, device="cuda", dtype=torch.bfloat16)
        launch[path](x if path != "decode" else x[:16], ws[0], rows[path])
    equal = {p: torch.equal(rows[p][:16].view(torch.int16), rows["decode"].view(torch.int16)) for p in ("mid", "tall")}
    del ws
    torch.cuda.empty_cache()
    return {"N": N, "K": K, "config": vars(config), "us": us, "bits_equal_decode": equal}


def paths_report(results: list[dict], ms: list[int]) -> list[str]:
    """Per M: each path's time over the decode tiles' and over cuBLAS's (geometric means over the shapes), and
    how many shapes each path is the fastest of the three for."""
    def gmean(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")

    lines = []
    for M in ms:
        key = M if M in results[0]["us"]["decode"] else str(M)
        parts = []
        for path in PATHS:
            over_decode = gmean([r["us"][path][key] / r["us"]["decode"][key] for r in results])
            over_cublas = gmean([r["us"][path][key] / r["us"]["cublas"][key] for r in results])
            wins = sum(min(PATHS, key=lambda p, r=r: r["us"][p][key]) == path for r in results)
            parts.append(f"{path} {over_decode:.2f}x decode, {over_cublas:.2f}x cuBLAS, fastest on {wins}")
        lines.append(f"M={M:4d}: " + "; ".join(parts))
    unequal = [f"{r['N']}x{r['K']} {p}" for r in results for p, ok in r["bits_equal_decode"].items() if not ok]
    lines.append(f"rows unequal to the decode rows: {', '.join(unequal) or 'none'} ({len(results)} shapes)")
    return lines


def _total(row: dict, ms: list[int]) -> float:
    us = row["us"]
    return sum(us[M] for M in ms) if "error" not in us else float("inf")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--m", default="1,4,16")
    ap.add_argument("--shapes", default="", help="N:K,... (default: every served geometry's layer shapes)")
    ap.add_argument("--budget-s", type=float, default=480, help="stop starting new shapes after this long")
    ap.add_argument("--small-mb", type=float, default=0,
                    help="only shapes whose weight is at most this many MB, with narrow tiles and any program count")
    ap.add_argument("--block-m", default="64",
                    help="activation tile heights, e.g. 16,64: below 64 a tile runs mma.sync, not the tall path's "
                         "wgmma, so each such config's rows are also compared bit for bit with the tall path's")
    ap.add_argument("--paths", action="store_true",
                    help="time the shipped config through the decode, mid and tall paths instead of sweeping configs")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: this sweep measures GPU kernels", file=sys.stderr)
        return 2
    ms = [int(m) for m in a.m.split(",")]
    todo = [tuple(int(v) for v in s.split(":")) for s in a.shapes.split(",") if s] or shapes()
    if a.small_mb:
        todo = [(N, K) for N, K in todo if N * K * 2 <= a.small_mb * 1e6]
    random.Random(0).shuffle(todo)  # a sweep cut short by its budget still spans small and large shapes
    a.out.mkdir(parents=True, exist_ok=True)
    t0, results = time.perf_counter(), []
    if a.paths:
        for N, K in todo:
            if time.perf_counter() - t0 > a.budget_s:
                print(f"budget spent after {len(results)} of {len(todo)} shapes", flush=True)
                break
            results.append(time_paths(N, K, ms))
            (a.out / "decode_gemm_paths.json").write_text(json.dumps(
                {"m": ms, "device": torch.cuda.get_device_name(), "shapes": results}))
        print("\n".join(paths_report(results, ms)), flush=True)
        return 0
    for i, (N, K) in enumerate(todo, 1):
        if time.perf_counter() - t0 > a.budget_s:
            print(f"budget spent after {i - 1} of {len(todo)} shapes", flush=True)
            break
        r = sweep_shape(N, K, ms, small=bool(a.small_mb), block_ms=tuple(int(b) for b in a.block_m.split(",")))
        results.append(r)
        ok = [x for x in r["rows"] if "error" not in x["us"] and x.get("bits_equal_tall", True)]
        best = min(ok, key=lambda x: _total(x, ms))
        shipped = next(x for x in r["rows"] if x["shipped"])
        c = best["config"]

        def per_m(us: dict) -> str:
            return "/".join(f"{us.get(M, float('nan')):.1f}" for M in ms)

        print(f"[{i}/{len(todo)} {time.perf_counter() - t0:5.0f}s] N={N:6d} K={K:6d} floor={r['floor_us']:6.1f} "
              f"cublas={per_m(r['cublas_us'])} shipped={per_m(shipped['us'])} best={per_m(best['us'])} "
              f"bm{c['block_m']} bn{c['block_n']} bk{c['block_k']} s{c['split_k']} st{c['num_stages']} ({len(ok)} configs, "
              f"{sum(x.get('bits_equal_tall') is False for x in r['rows'])} unequal to the tall rows)", flush=True)
        (a.out / "decode_gemm_sweep.json").write_text(json.dumps(
            {"m": ms, "device": torch.cuda.get_device_name(), "shapes": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
