"""Decode GEMMs of every served geometry against the weight-read floor, on a CUDA GPU (#18).

    python integration/gpu/geometry_gemm_floor.py --out DIR [--m 1,4,16] [--geometries a,b] [--cpu-smoke]

For each geometry in vosti_plugin.integration.geometries, the per-layer GEMMs (qkv, o, gate_up, down; the
lm_head once) in bf16 at decode batch M: vosti's `linear` with the config the geometry rule selects, cuBLAS
(`torch.matmul`), and the weight-read floor: the longer of weight bytes / 4.3 TB/s (H200 copy rate) and the
measured time of a kernel that does nothing but read the weight once (the fastest of a few read kernels; a small
weight is read in launch and memory latency, not at the copy rate, by any kernel). Timed under CUDA graphs over
rotating weight copies larger than L2, as vLLM runs decode (dense_bench's timer). Target: vosti <= 1.3x the
floor for M <= 16. Writes DIR/geometry_gemm_floor.json and prints a table; exit 0 always (a measurement).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

if "--cpu-smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"   # before triton is imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from integration.gpu import dense_bench  # noqa: E402
from vosti_plugin.integration.geometries import GEOMETRIES  # noqa: E402

TARGET = 1.3
# (elements per load, loads per program, warps) of the read kernels; the floor is the fastest of them
READ_CONFIGS = ((2048, 1, 4), (4096, 4, 8), (4096, 16, 8), (8192, 8, 8))


@triton.jit
def _read_weights_kernel(w_ptr, out_ptr, numel, BLOCK: tl.constexpr, LOADS: tl.constexpr):
    """Each program reads LOADS contiguous blocks of the weight and stores one sum (so no load is dead)."""
    base = tl.program_id(0).to(tl.int64) * BLOCK * LOADS
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(LOADS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(w_ptr + offs, mask=offs < numel, other=0.0).to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


def read_weights(w: torch.Tensor, out: torch.Tensor, block: int, loads: int, warps: int) -> None:
    grid = (triton.cdiv(w.numel(), block * loads),)
    _read_weights_kernel[grid](w, out, w.numel(), BLOCK=block, LOADS=loads, num_warps=warps)


def read_floor_us(ws: list[torch.Tensor]) -> tuple[float, tuple[int, int, int]]:
    """The fastest measured read of one weight copy, µs, and the read config that achieved it."""
    best = (float("inf"), READ_CONFIGS[0])
    for block, loads, warps in READ_CONFIGS:
        out = torch.empty(triton.cdiv(ws[0].numel(), block * loads), device=ws[0].device, dtype=torch.float32)
        t = dense_bench._graph_time_us(lambda i: read_weights(ws[i], out, block, loads, warps), len(ws))
        best = min(best, (t, (block, loads, warps)))
    return best


def layer_shapes(config: dict) -> dict[str, tuple[int, int]]:
    """name -> (N, K) of the weight of each GEMM one decode step runs (qkv with bias or not is the same GEMM)."""
    c = config.get("text_config", config)
    hidden, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    head_dim = c.get("head_dim") or hidden // heads
    return {"qkv": ((heads + 2 * kv) * head_dim, hidden), "o": (hidden, heads * head_dim),
            "gate_up": (2 * c["intermediate_size"], hidden), "down": (hidden, c["intermediate_size"]),
            "lm_head": (c["vocab_size"], hidden)}


def measure(names: list[str], ms: list[int]) -> list[dict]:
    from vosti_plugin.ops import matmul

    rows, seen, reads = [], {}, {}
    print(f"  {'geometry':18s} {'gemm':8s} {'N':>6s} {'K':>6s} {'M':>3s} {'split':>5s} {'vosti_us':>9s} "
          f"{'cublas_us':>9s} {'bytes_us':>8s} {'read_us':>8s} {'v/floor':>7s} target", flush=True)
    for name in names:
        for gemm, (N, K) in layer_shapes(GEOMETRIES[name]).items():
            cfg = matmul.select_config(N, K, torch.bfloat16)
            for M in ms:
                key = (N, K, M)
                if key not in seen:
                    ws, wbytes = dense_bench._weights(N, K)
                    x = torch.randn(M, K, device=dense_bench.DEVICE).bfloat16()
                    v = dense_bench._graph_time_us(lambda i: matmul.linear(x, ws[i]), len(ws))
                    c = dense_bench._graph_time_us(lambda i: torch.matmul(x, ws[i].t()), len(ws))
                    if (N, K) not in reads:
                        reads[(N, K)] = read_floor_us(ws)
                    seen[key] = (v, c, wbytes / dense_bench.HBM_BYTES_PER_S * 1e6, *reads[(N, K)])
                    del ws, x
                    if dense_bench.DEVICE == "cuda":
                        torch.cuda.empty_cache()
                v, c, bytes_floor, read, read_cfg = seen[key]
                floor = max(bytes_floor, read)
                target = ("OK" if v <= TARGET * floor else "MISS") if M <= 16 else "-"
                rows.append(dict(geometry=name, gemm=gemm, N=N, K=K, M=M, config=vars(cfg), vosti_us=v,
                                 cublas_us=c, bytes_floor_us=bytes_floor, read_floor_us=read,
                                 read_config=dict(zip(("block", "loads", "warps"), read_cfg)), floor_us=floor,
                                 vosti_over_floor=v / floor, vosti_over_bytes_floor=v / bytes_floor, target=target))
                print(f"  {name:18s} {gemm:8s} {N:6d} {K:6d} {M:3d} {cfg.split_k:5d} {v:9.1f} {c:9.1f} "
                      f"{bytes_floor:8.1f} {read:8.1f} {v / floor:7.2f} {target}", flush=True)
    return rows


LAYER_GEMMS = ("qkv", "o", "gate_up", "down")


def m1_sums(rows: list[dict]) -> dict:
    """Per geometry at M = 1: one layer's four GEMMs summed (vosti, cuBLAS, both floors) and the lm_head, µs."""
    out: dict = {}
    for r in rows:
        if r["M"] != 1:
            continue
        g = out.setdefault(r["geometry"], {})
        part = "layer" if r["gemm"] in LAYER_GEMMS else "lm_head"
        for key, col in (("vosti", "vosti_us"), ("cublas", "cublas_us"), ("bytes_floor", "bytes_floor_us"),
                         ("read_floor", "read_floor_us")):
            g[f"{part}_{key}"] = round(g.get(f"{part}_{key}", 0.0) + r[col], 1)
    return out


def compact(raw: dict, command: str) -> dict:
    """The committed summary: the counts, the worst cell and the per-geometry sums (not every row)."""
    return {"command": command, "summary": raw["summary"], "m1_sums_us": m1_sums(raw["rows"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--m", default="1,4,16", help="decode batch sizes")
    ap.add_argument("--geometries", default="", help="comma-separated names (default: all)")
    ap.add_argument("--cpu-smoke", action="store_true", help="one tiny geometry on CPU, M = 1 (script logic only)")
    ap.add_argument("--compact", metavar="RAW", help="write OUT/summary.json from a run's geometry_gemm_floor.json")
    args = ap.parse_args()
    if args.compact:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        raw = json.loads(Path(args.compact).read_text())
        (out / "summary.json").write_text(json.dumps(compact(raw, raw.get("command", "")), indent=1) + "\n")
        return 0
    names = [n for n in args.geometries.split(",") if n] or list(GEOMETRIES)
    unknown = sorted(set(names) - set(GEOMETRIES))
    if unknown:
        ap.error(f"unknown geometries {unknown}; known: {', '.join(GEOMETRIES)}")
    ms = [int(m) for m in args.m.split(",")]
    if args.cpu_smoke:
        dense_bench.DEVICE = "cpu"
        os.environ.setdefault("TRITON_INTERPRET", "1")
        GEOMETRIES["cpu-smoke"] = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                                   "head_dim": 16, "intermediate_size": 128, "vocab_size": 256}
        names, ms = ["cpu-smoke"], [1]
        dense_bench._graph_time_us = _cpu_time_us
    elif not torch.cuda.is_available():
        print("no CUDA GPU: use --cpu-smoke on CPU", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rows = measure(names, ms)
    decode = [r for r in rows if r["M"] <= 16]
    summary = {"rows": len(rows), "decode_rows": len(decode), "target_x_floor": TARGET,
               "decode_within_target": sum(r["target"] == "OK" for r in decode),
               "decode_within_target_of_bytes_floor": sum(r["vosti_over_bytes_floor"] <= TARGET for r in decode),
               "decode_within_target_cublas": sum(r["cublas_us"] <= TARGET * r["floor_us"] for r in decode),
               "worst": max(decode, key=lambda r: r["vosti_over_floor"], default=None),
               "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
               "seconds": round(time.perf_counter() - t0, 1)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python3 integration/gpu/geometry_gemm_floor.py " + " ".join(sys.argv[1:])
    raw = {"command": command, "summary": summary, "rows": rows}
    (out / "geometry_gemm_floor.json").write_text(json.dumps(raw, indent=1))
    (out / "summary.json").write_text(json.dumps(compact(raw, command), indent=1) + "\n")
    print(f"decode GEMMs within {TARGET}x of the floor: {summary['decode_within_target']}/{len(decode)}; "
          f"worst {summary['worst']['geometry'] if summary['worst'] else '-'} "
          f"{summary['worst']['gemm'] if summary['worst'] else ''} "
          f"{summary['worst']['vosti_over_floor'] if summary['worst'] else 0:.2f}x", flush=True)
    return 0


def _cpu_time_us(fn_per_copy, n_copies: int, reps: int = 1) -> float:
    t = time.perf_counter()
    fn_per_copy(0)
    return (time.perf_counter() - t) * 1e6


if __name__ == "__main__":
    sys.exit(main())
