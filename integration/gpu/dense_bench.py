"""vosti dense ops on a CUDA GPU: bf16 row invariance (compiled Triton) + GEMM benchmark.

    python integration/gpu/dense_bench.py --out $OUT/dense.json [--quick] [--no-sweep] [--budget-s 420]

Sections (each isolated: a failure is recorded in the JSON and the next section still runs):
  1. invariance: for M in 1..512 (and a 4096-row prefill batch), every row of an M-row launch must equal,
     bit for bit, the 1-row launch of that row -- mm / linear(+bias) on the Llama-3.1-8B GEMM shapes,
     RMSNorm / fused add+RMSNorm / Gemma (1+w), SiLU / GELU-tanh and-mul, log_softmax / softmax / mean;
     plus fp32 (ieee) mm.
  2. accuracy: bf16 GEMMs vs an fp64 reference (bound: e + 2^-8 (|ref| + e), e = 2 K 2^-24 (|a| @ |b|)).
  3. compile: torch.compile(dynamic) of the vosti custom ops equals eager bit for bit.
  4. bench: per-GEMM time at M = 1, 4, 16, 64, 512, 4096 for Llama-3.1-8B shapes, vosti vs
     torch.matmul (cuBLAS) vs the weight-read floor (weight bytes / 4.3 TB/s). Timed under CUDA graphs
     over rotating weight copies (> L2), as vLLM runs decode. Target for M <= 16: <= 1.2x the floor.
  5. sweep (unless --no-sweep, while the time budget lasts): alternative catalog configs per shape
     at M = 1, 16 and 4096, to tune CATALOG offline (never at run time).
Prints a table, PASS/FAIL for invariance, and writes everything to --out as it goes.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import traceback

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import torch  # noqa: E402

HBM_BYTES_PER_S = 4.3e12
LLAMA_SHAPES = {  # name: (N, K)
    "qkv": (6144, 4096),
    "o": (4096, 4096),
    "gate_up": (28672, 4096),
    "down": (4096, 14336),
    "lm_head": (128256, 4096),
}
BENCH_M = [1, 4, 16, 64, 512, 4096]
NORM_HIDDEN = (4096, 2560, 128, 256)
ACT_WIDTHS = (14336, 10240)
VOCABS = (128256, 262208)
PREFILL_ROWS = 4096
DEVICE = "cuda"
SWEEP_M = (1, 16, 4096)


def _use_cpu_smoke() -> None:
    """--cpu-smoke: the same code paths on CPU through the Triton interpreter with tiny shapes, to
    check this script's logic without a GPU (timings there mean nothing)."""
    global LLAMA_SHAPES, BENCH_M, NORM_HIDDEN, VOCABS, PREFILL_ROWS, DEVICE, SWEEP_M, ACT_WIDTHS
    os.environ["TRITON_INTERPRET"] = "1"
    LLAMA_SHAPES = {"qkv": (384, 128), "o": (128, 128), "gate_up": (688, 128), "down": (128, 344), "lm_head": (512, 128)}
    BENCH_M = [1, 16, 64]
    NORM_HIDDEN = (128, 344)
    ACT_WIDTHS = (256, 1000)
    VOCABS = (512, 5000)
    PREFILL_ROWS = 96
    DEVICE = "cpu"
    SWEEP_M = (1, 16)


def device_ready(cpu_smoke: bool, use_cpu_smoke) -> bool:
    """Switch a GPU script to its CPU smoke shapes, or check that a CUDA device is there (printing why not)."""
    if cpu_smoke:
        use_cpu_smoke()
        return True
    if not torch.cuda.is_available():
        print("FAIL: no CUDA device (use --cpu-smoke to check the script on CPU)")
        return False
    return True


class Report:
    def __init__(self, path: str) -> None:
        self.path = path
        self.data: dict = {"sections": {}, "errors": {}}

    def put(self, section: str, value) -> None:
        self.data["sections"][section] = value
        self.flush()

    def error(self, section: str, exc: BaseException) -> None:
        self.data["errors"][section] = "".join(traceback.format_exception(exc))[-4000:]
        print(f"[{section}] ERROR: {exc!r}", flush=True)
        self.flush()

    def run_section(self, name: str, fn, t0: float):
        """Run one section under a header; its exception is recorded instead of ending the run."""
        print(f"\n== {name} ({time.time() - t0:.0f}s)", flush=True)
        try:
            return fn()
        except Exception as exc:
            self.error(name, exc)
            return None
        finally:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def flush(self) -> None:
        if not self.path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path + ".tmp", "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(self.path + ".tmp", self.path)


def _bits_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    return x.shape == y.shape and x.dtype == y.dtype and torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8))


def _m_values(quick: bool) -> list[int]:
    ms = list(range(1, 34)) + [47, 63, 64, 65, 96, 127, 128, 129, 191, 200, 255, 256, 257, 320, 383, 384, 448, 511, 512]
    return ms[::3] + [512] if quick else ms


def _row_bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8).reshape(t.shape[0], -1)


def _check_rows(fn, pool: torch.Tensor, ms: list[int], gen: torch.Generator) -> dict:
    """fn(rows) -> output rows. Single-row results of every pool row are the reference; each M-row
    batch draws pool rows in random order and must reproduce them bit for bit."""
    singles = _row_bits(torch.cat([fn(pool[i : i + 1]) for i in range(pool.shape[0])], dim=0))
    failures = []
    for M in ms:
        idx = torch.randperm(pool.shape[0], generator=gen)[:M].to(pool.device)
        same = (_row_bits(fn(pool[idx])) == singles[idx]).all(dim=1)
        if not bool(same.all()):
            bad = (~same).nonzero().flatten().tolist()
            failures.append({"M": M, "bad_rows": bad[:8], "n_bad": len(bad)})
    # prefill-sized batch: pool rows scattered among PREFILL_ROWS other rows
    filler = torch.randn((PREFILL_ROWS,) + tuple(pool.shape[1:]), device=pool.device).to(pool.dtype)
    where = torch.randperm(PREFILL_ROWS, generator=gen)[: pool.shape[0]].to(pool.device)
    filler[where] = pool
    same = (_row_bits(fn(filler))[where] == singles).all(dim=1)
    if not bool(same.all()):
        bad = (~same).nonzero().flatten().tolist()
        failures.append({"M": PREFILL_ROWS, "bad_rows": bad[:8], "n_bad": len(bad)})
    return {"ok": not failures, "checked_M": ms + [PREFILL_ROWS], "failures": failures}


def section_invariance(report: Report, quick: bool) -> bool:
    from vosti_plugin.ops import matmul, rmsnorm, softmax

    dev = DEVICE
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    ms = _m_values(quick)
    pool_rows = 512 if not quick else 128
    if DEVICE == "cpu":
        ms, pool_rows = [1, 2, 17, 33, 64], 64
    results = {}

    def record(name, res):
        results[name] = res
        print(f"  invariance {name:28s} {'PASS' if res['ok'] else 'FAIL'} {res['failures'][:2] if not res['ok'] else ''}", flush=True)
        report.put("invariance", results)

    for name, (N, K) in LLAMA_SHAPES.items():
        w = (torch.randn(N, K, device=dev) / math.sqrt(K)).bfloat16()
        bias = torch.randn(N, device=dev).bfloat16()
        pool = torch.randn(pool_rows, K, device=dev).bfloat16()
        record(f"linear_bf16_{name}", _check_rows(lambda x: matmul.linear(x, w), pool, ms, gen))
        if name in ("qkv", "o"):
            record(f"linear_bias_bf16_{name}", _check_rows(lambda x: matmul.linear(x, w, bias), pool, ms, gen))
            wt = w.t().contiguous()  # mm with a row-major [K, N] operand
            record(f"mm_bf16_{name}", _check_rows(lambda x: matmul.mm(x, wt), pool, ms, gen))
        del w
    N32, K32 = LLAMA_SHAPES["o"]
    w32 = torch.randn(N32, K32, device=dev) / math.sqrt(K32)
    pool32 = torch.randn(pool_rows, K32, device=dev)
    record("linear_fp32_ieee_o", _check_rows(lambda x: matmul.linear(x, w32), pool32, ms, gen))

    for H in NORM_HIDDEN:
        wn = torch.randn(H, device=dev).bfloat16()
        pool = torch.randn(pool_rows, H, device=dev).bfloat16()
        res_pool = torch.randn(pool_rows, H, device=dev).bfloat16()
        record(f"rms_norm_{H}", _check_rows(lambda x: rmsnorm.rms_norm(x, wn, 1e-5), pool, ms, gen))
        record(f"gemma_rms_norm_{H}", _check_rows(lambda x: rmsnorm.rms_norm(x, wn, 1e-6, gemma=True), pool, ms, gen))
        both = torch.cat([pool, res_pool], dim=1)  # rows carry (x, residual) together
        record(f"fused_add_rms_norm_{H}", _check_rows(
            lambda xr: torch.cat(rmsnorm.fused_add_rms_norm(xr[:, :H], xr[:, H:], wn, 1e-5), dim=1), both, ms, gen))
    from vosti_plugin.ops import activation

    for d in ACT_WIDTHS:
        pool = (torch.randn(pool_rows, 2 * d, device=dev) * 3).bfloat16()
        record(f"silu_and_mul_{d}", _check_rows(activation.silu_and_mul, pool, ms, gen))
        record(f"gelu_tanh_and_mul_{d}", _check_rows(activation.gelu_tanh_and_mul, pool, ms, gen))
    for V in VOCABS:
        pool = (torch.randn(min(pool_rows, 128), V, device=dev) * 3).bfloat16()
        record(f"log_softmax_{V}", _check_rows(lambda x: softmax.log_softmax(x.float()), pool, [m for m in ms if m <= 128], gen))
        record(f"softmax_{V}", _check_rows(lambda x: softmax.softmax(x, dtype=torch.float32), pool, [m for m in ms if m <= 128], gen))
        record(f"mean_{V}", _check_rows(lambda x: softmax.mean_last_dim(x, keepdim=True), pool, [m for m in ms if m <= 128], gen))
    ok = all(r["ok"] for r in results.values())
    report.put("invariance", results)
    report.data["invariance_pass"] = ok
    return ok


def section_accuracy(report: Report) -> None:
    from vosti_plugin.ops import matmul

    out = {}
    for name, (N, K) in LLAMA_SHAPES.items():
        a = torch.randn(64, K, device=DEVICE).bfloat16()
        w = (torch.randn(N, K, device=DEVICE) / math.sqrt(K)).bfloat16()
        got = matmul.linear(a, w).double()
        a64, w64 = a.double(), w.double()
        ref = a64 @ w64.t()
        acc_err = 2 * K * 2.0**-24 * (a64.abs() @ w64.abs().t())
        bound = 2.0**-8 * (ref.abs() + acc_err) + acc_err + 1e-30  # one bf16 rounding of the fp32 result
        err = (got - ref).abs()
        out[name] = {"ok": bool((err <= bound).all()), "max_abs_err": err.max().item(),
                     "max_err_over_bound": (err / bound).max().item()}
        print(f"  accuracy {name:8s} {'OK' if out[name]['ok'] else 'OUT OF BOUND'} max|err|={out[name]['max_abs_err']:.3e} "
              f"err/bound={out[name]['max_err_over_bound']:.3f}", flush=True)
        del a, w, got, ref
    report.put("accuracy", out)


def section_compile(report: Report) -> None:
    import vosti_plugin.ops.torch_ops  # noqa: F401

    w = (torch.randn(4096, 4096, device="cuda") / 64).bfloat16()
    wn = torch.randn(4096, device="cuda").bfloat16()

    def block(x, r):
        h, r2 = torch.ops.vosti.fused_add_rms_norm(x, r, wn, 1e-5, False)
        return torch.ops.vosti.linear(h, w, None), r2

    compiled = torch.compile(block, dynamic=True, fullgraph=True)
    out = {}
    for M in (1, 7, 64, 300):
        x, r = torch.randn(M, 4096, device="cuda").bfloat16(), torch.randn(M, 4096, device="cuda").bfloat16()
        e, c = block(x, r), compiled(x, r)
        out[M] = _bits_equal(e[0], c[0]) and _bits_equal(e[1], c[1])
    res = {"ok": all(out.values()), "per_M": out}
    print(f"  compile (dynamic, fullgraph) equals eager: {'PASS' if res['ok'] else 'FAIL'} {out}", flush=True)
    report.put("compile", res)


def _graph_time_us(fn_per_copy, n_copies: int, reps: int = 3) -> float:
    """Mean µs per call of fn_per_copy(i), i cycling over weight copies, captured in a CUDA graph."""
    if DEVICE == "cpu":
        fn_per_copy(0)
        t = time.perf_counter()
        for j in range(2):
            fn_per_copy(j % n_copies)
        return (time.perf_counter() - t) / 2 * 1e6
    for i in range(n_copies):  # warm-up: compiles kernels, fills caches of host-side state
        fn_per_copy(i)
    torch.cuda.synchronize()
    calls = max(n_copies, 8) * 2
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i in range(n_copies):
                fn_per_copy(i)
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for j in range(calls):
                fn_per_copy(j % n_copies)
        g.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(reps):
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) * 1e3 / calls)
        del g
        return best
    except Exception as exc:  # eager fallback, flagged by the caller through the value being eager
        print(f"    (graph capture failed: {exc!r}; timing eagerly)", flush=True)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for j in range(calls):
            fn_per_copy(j % n_copies)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / calls


def _weights(N: int, K: int):
    wbytes = N * K * 2
    n_copies = max(1, math.ceil(256e6 / wbytes)) if DEVICE == "cuda" else 1
    return [(torch.randn(N, K, device=DEVICE) / math.sqrt(K)).bfloat16() for _ in range(n_copies)], wbytes


def section_bench(report: Report, ms: list[int]) -> dict:
    from vosti_plugin.ops import matmul

    rows = []
    print("\n  GEMM benchmark (bf16, CUDA graphs, rotating weights > L2)")
    hdr = f"  {'gemm':8s} {'N':>6s} {'K':>6s} {'M':>5s} {'split':>5s} {'vosti_us':>9s} {'cublas_us':>9s} {'floor_us':>8s} {'v/floor':>7s} {'v/cublas':>8s} {'TFLOP/s':>7s} target"
    print(hdr, flush=True)
    for name, (N, K) in LLAMA_SHAPES.items():
        ws, wbytes = _weights(N, K)
        floor = wbytes / HBM_BYTES_PER_S * 1e6
        cfg = matmul.select_config(N, K, torch.bfloat16)
        for M in ms:
            x = torch.randn(M, K, device=DEVICE).bfloat16()
            try:
                v = _graph_time_us(lambda i: matmul.linear(x, ws[i]), len(ws))
                c = _graph_time_us(lambda i: torch.matmul(x, ws[i].t()), len(ws))
            except (torch.cuda.OutOfMemoryError, RuntimeError) as exc:
                report.error(f"bench_{name}_{M}", exc)
                torch.cuda.empty_cache()
                continue
            tflops = 2 * M * N * K / (v * 1e-6) / 1e12
            target = ("OK" if v <= 1.2 * floor else "MISS") if M <= 16 else "-"
            row = dict(gemm=name, N=N, K=K, M=M, config=vars(cfg), vosti_us=v, cublas_us=c, floor_us=floor,
                       vosti_over_floor=v / floor, vosti_over_cublas=v / c, vosti_tflops=tflops, target=target)
            rows.append(row)
            print(f"  {name:8s} {N:6d} {K:6d} {M:5d} {cfg.split_k:5d} {v:9.1f} {c:9.1f} {floor:8.1f} {v / floor:7.2f} "
                  f"{v / c:8.2f} {tflops:7.1f} {target}", flush=True)
            report.put("bench", rows)
            del x
        del ws
        torch.cuda.empty_cache()
    decode = [r for r in rows if r["M"] <= 16]
    summary = {"decode_rows": len(decode), "decode_within_1.2x_floor": sum(r["target"] == "OK" for r in decode)}
    report.data["bench_summary"] = summary
    report.put("bench", rows)
    return summary


def _candidates(N: int, K: int) -> list:
    from vosti_plugin.ops.matmul import MatmulConfig

    out = []
    for bn, bk in ((64, 128), (128, 64), (32, 128), (128, 128)):
        for split in (1, 2, 4, 8, 16):
            if K % (split * bk) or K // split < 256:
                continue
            programs = math.ceil(N / bn) * split
            if programs < 132 or programs > 4096:
                continue
            stages = 4 if bk * (64 + bn) * 2 * 4 <= 200_000 else 3
            out.append(MatmulConfig(block_m=64, block_n=bn, block_k=bk, split_k=split, num_warps=4, num_stages=stages))
    return out


def section_sweep(report: Report, deadline: float) -> None:
    from vosti_plugin.ops import matmul

    results = {}
    print("\n  Config sweep (offline tuning data for CATALOG; time per call in µs)", flush=True)
    for name, (N, K) in LLAMA_SHAPES.items():
        if time.time() > deadline:
            print("  sweep stopped: time budget spent", flush=True)
            break
        ws, wbytes = _weights(N, K)
        floor = wbytes / HBM_BYTES_PER_S * 1e6
        current = matmul.select_config(N, K, torch.bfloat16)
        rows = []
        for cfg in [current] + [c for c in _candidates(N, K) if c != current]:
            if time.time() > deadline:
                break
            times = {}
            try:
                for M in SWEEP_M:
                    x = torch.randn(M, K, device=DEVICE).bfloat16()
                    if DEVICE == "cpu":
                        x = x.float()

                    def run(i, x=x, cfg=cfg, M=M):
                        out = torch.empty(M, N, device=DEVICE, dtype=x.dtype)
                        return matmul.launch_matmul(x, ws[i].t().to(x.dtype), None, out, cfg)

                    times[M] = _graph_time_us(run, len(ws), reps=2)
            except Exception as exc:  # a config that does not compile or fit is data too
                times["error"] = repr(exc)[:200]
            rows.append({"config": vars(cfg), "current": cfg == current, "us": times,
                         "m1_over_floor": times.get(1, float("nan")) / floor})
            t = times
            print(f"  {name:8s} bn={cfg.block_n:3d} bk={cfg.block_k:3d} split={cfg.split_k:2d} st={cfg.num_stages} "
                  + " ".join(f"M{m}={t.get(m, float('nan')):8.1f}" for m in SWEEP_M) + " "
                  f"floor={floor:6.1f}{'  <- current' if cfg == current else ''}{'  ' + t['error'] if 'error' in t else ''}",
                  flush=True)
        results[name] = rows
        report.put("sweep", results)
        del ws
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="dense_bench.json")
    ap.add_argument("--quick", action="store_true", help="fewer M values and a smaller row pool")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop the sweep after this many seconds in all")
    ap.add_argument("--cpu-smoke", action="store_true", help="run the script logic on CPU with tiny shapes")
    args = ap.parse_args()
    t0 = time.time()
    report = Report(args.out)
    if not device_ready(args.cpu_smoke, _use_cpu_smoke):
        return 2
    import triton

    gpu = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu (interpreter smoke run)"
    sms = torch.cuda.get_device_properties(0).multi_processor_count if DEVICE == "cuda" else 0
    report.data["env"] = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
                          "gpu": gpu, "sms": sms, "device": DEVICE}
    print(f"env: {report.data['env']}", flush=True)
    from vosti_plugin.ops import matmul

    report.data["catalog_llama"] = {n: vars(matmul.select_config(N, K, torch.bfloat16)) for n, (N, K) in LLAMA_SHAPES.items()}
    invariance_ok = False
    for name, run in (("invariance", lambda: section_invariance(report, args.quick)),
                      ("accuracy", lambda: section_accuracy(report)),
                      ("compile", lambda: section_compile(report) if DEVICE == "cuda" else None),
                      ("bench", lambda: section_bench(report, BENCH_M))):
        result = report.run_section(name, run, t0)
        if name == "invariance":
            invariance_ok = bool(result)
    if not args.no_sweep:
        print(f"\n== sweep ({time.time() - t0:.0f}s)", flush=True)
        try:
            section_sweep(report, t0 + args.budget_s)
        except Exception as exc:
            report.error("sweep", exc)
    report.data["wall_s"] = time.time() - t0
    report.flush()
    summary = report.data.get("bench_summary", {})
    print(f"\nbench: {summary.get('decode_within_1.2x_floor', '?')}/{summary.get('decode_rows', '?')} decode GEMMs "
          f"(M <= 16) within 1.2x of the weight-read floor")
    print(f"INVARIANCE: {'PASS' if invariance_ok else 'FAIL'}   (errors in sections: {sorted(report.data['errors'])})")
    print(f"wrote {args.out} in {time.time() - t0:.0f}s")
    return 0 if invariance_ok else 1


if __name__ == "__main__":
    sys.exit(main())
