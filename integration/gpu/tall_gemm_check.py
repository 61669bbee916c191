"""vosti's tall GEMM path on a CUDA GPU: same bits per row as the split + combine path, and how fast.

    python integration/gpu/tall_gemm_check.py --out $OUT/tall_gemm.json [--quick] [--no-sweep] [--budget-s 540]
    python integration/gpu/tall_gemm_check.py --cpu-smoke --out /tmp/tall_smoke.json   # logic check, no GPU

For every catalog GEMM (N, K) of Llama-3.1-8B, Qwen3-8B and Gemma-3-4B in bf16 and M in 256..8192:
  1. bits: launch_matmul_tall(tall_config(cfg)) against launch_matmul(cfg) on random bf16 operands, every
     row of the M-row output (qkv also with a bias); plus a control launch with another split_k, which
     must differ (so the comparison can fail) and matmul.linear with VOSTI_TALL_GEMM=1.
  2. decode: rows of the M-row tall output against the same rows computed by decode-sized launches
     (1..16 rows, the rows drawn at random) on the current path.
  3. timing (triton.testing.do_bench: warm-up, L2 flushed per call): tall vs current vs torch.matmul
     (cuBLAS) in µs and TFLOP/s.
  4. sweep (unless --no-sweep, while --budget-s lasts): tall tile candidates (BLOCK_M x BLOCK_N x warps x
     stages) per GEMM at M = SWEEP_M, each one's bits checked against the current path; the fastest
     bit-equal candidate per GEMM and per (block_k, split or not) -- what `tall_config` keys on.
Prints mismatching shapes; the exit status is 1 if any row differs in sections 1-2 (or a control fails to
differ), 0 otherwise. The JSON (--out) is rewritten after every case, so a spent budget leaves a report.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import torch  # noqa: E402

from integration.gpu.dense_bench import Report, device_ready  # noqa: E402

MODELS = {  # model: {gemm: (N, K)}, TP=1
    "Llama-3.1-8B": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
                     "lm_head": (128256, 4096)},
    "Qwen3-8B": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (24576, 4096), "down": (4096, 12288),
                 "lm_head": (151936, 4096)},
    "Gemma-3-4B": {"qkv": (4096, 2560), "o": (2560, 2048), "gate_up": (20480, 2560), "down": (2560, 10240),
                   "lm_head": (262208, 2560)},
}
M_VALUES = [256, 512, 1024, 2048, 4096, 8192]
DECODE_SIZES = list(range(1, 17))
DECODE_ROWS = 256  # rows per case recomputed by decode-sized launches
SWEEP_M = 4096
SWEEP_BLOCK_M = (64, 128)
SWEEP_BLOCK_N = (128, 256)
SWEEP_WARPS = (4, 8)
SWEEP_STAGES = (3, 4)
SMEM_BYTES = 227 * 1024
DTYPE = torch.bfloat16
DEVICE = "cuda"


def _current_config(N: int, K: int):
    from vosti_plugin.ops import matmul

    return matmul.select_config(N, K, DTYPE)


def _tall_config(N: int, K: int):
    from vosti_plugin.ops import matmul

    return matmul.tall_config(_current_config(N, K), DTYPE)


def _use_cpu_smoke() -> None:
    """--cpu-smoke: the same code paths on CPU through the Triton interpreter, fp32, tiny shapes and small
    split configs (the CPU catalog has no splits), to check this script's logic; timings mean nothing."""
    global MODELS, M_VALUES, DECODE_SIZES, DECODE_ROWS, SWEEP_M, SWEEP_BLOCK_M, SWEEP_BLOCK_N, SWEEP_WARPS
    global SWEEP_STAGES, DTYPE, DEVICE, _current_config, _tall_config
    os.environ["TRITON_INTERPRET"] = "1"
    from vosti_plugin.ops.matmul import MatmulConfig

    MODELS = {"tiny-a": {"qkv": (96, 200), "o": (64, 64), "lm_head": (160, 64)}, "tiny-b": {"qkv": (96, 200)}}
    M_VALUES = [33, 70]
    DECODE_SIZES = [1, 2, 3, 4]
    DECODE_ROWS = 12
    SWEEP_M = 40
    SWEEP_BLOCK_M, SWEEP_BLOCK_N, SWEEP_WARPS, SWEEP_STAGES = (32, 64), (32, 64), (4,), (1,)
    DTYPE, DEVICE = torch.float32, "cpu"

    def current(N: int, K: int):
        return MatmulConfig(block_m=16, block_n=32, block_k=32, split_k=3 if K >= 96 else 1, num_stages=1)

    def tall(N: int, K: int):
        return dataclasses.replace(current(N, K), block_m=64, block_n=64)

    _current_config, _tall_config = current, tall


def _shapes() -> dict[tuple[int, int], list[str]]:
    """Unique (N, K) -> the model GEMMs that use it."""
    out: dict[tuple[int, int], list[str]] = {}
    for model, gemms in MODELS.items():
        for name, NK in gemms.items():
            out.setdefault(NK, []).append(f"{model}/{name}")
    return out


def _row_bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8).reshape(t.shape[0], -1)


def _bad_rows(x: torch.Tensor, y: torch.Tensor) -> list[int]:
    """Rows of x and y whose bits differ (x, y: [rows, N] of one dtype)."""
    return (~(_row_bits(x) == _row_bits(y)).all(dim=1)).nonzero().flatten().tolist()


def _operands(N: int, K: int, M: int, gen: torch.Generator):
    w = (torch.randn(N, K, generator=gen, device=DEVICE) / math.sqrt(K)).to(DTYPE)
    a = torch.randn(M, K, generator=gen, device=DEVICE).to(DTYPE)
    bias = torch.randn(N, generator=gen, device=DEVICE).to(DTYPE)
    return a, w, bias


def _launch(kind: str, a, w, bias, config):
    from vosti_plugin.ops import matmul

    out = torch.empty(a.shape[0], w.shape[0], device=a.device, dtype=a.dtype)
    fn = matmul.launch_matmul_tall if kind == "tall" else matmul.launch_matmul
    return fn(a, w.t(), bias, out, config)


def _decode_rows(a, w, bias, config, rows: list[int]) -> torch.Tensor:
    """The given rows of a @ w^T (+ bias), computed by current-path launches of DECODE_SIZES rows each."""
    outs, i, j = [], 0, 0
    while i < len(rows):
        size = DECODE_SIZES[j % len(DECODE_SIZES)]
        idx = torch.tensor(rows[i:i + size], device=a.device)
        outs.append(_launch("current", a[idx], w, bias, config))
        i, j = i + size, j + 1
    return torch.cat(outs, dim=0)


def _bits_case(case: dict, a, w, bias, cfg, tall, with_bias: bool) -> list[str]:
    """Fills case with the rows whose bits differ; returns failure lines."""
    where = f"{case['gemms'][0]} N={case['N']} K={case['K']} M={case['M']}"
    failures, tall_out = [], None
    for use_bias in ((False, True) if with_bias else (False,)):
        b = bias if use_bias else None
        got = _launch("tall", a, w, b, tall)
        bad = _bad_rows(got, _launch("current", a, w, b, cfg))
        tall_out = got if not use_bias else tall_out
        case[f"bad_rows{'_bias' if use_bias else ''}"] = {"n": len(bad), "first": bad[:8]}
        if bad:
            failures.append(f"bits {where} bias={use_bias}: {len(bad)}/{a.shape[0]} rows differ")
    sample = torch.randperm(a.shape[0], generator=torch.Generator().manual_seed(a.shape[0]))[:DECODE_ROWS].tolist()
    dec_bad = _bad_rows(tall_out[sample], _decode_rows(a, w, None, cfg, sample))
    case["decode_bad_rows"] = {"checked": len(sample), "n": len(dec_bad), "first": [sample[i] for i in dec_bad[:8]]}
    if dec_bad:
        failures.append(f"decode {where}: {len(dec_bad)}/{len(sample)} rows differ")
    return failures


def section_bits(report: Report, ms: list[int], deadline: float) -> bool:
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    cases, failures = [], []
    print(f"  {'gemm':34s} {'N':>6s} {'K':>5s} {'M':>5s} {'split':>5s} {'tall tiles':>10s} bits  decode", flush=True)
    for (N, K), users in _shapes().items():
        cfg, tall = _current_config(N, K), _tall_config(N, K)
        assert (tall.split_k, tall.k_per_split(K)) == (cfg.split_k, cfg.k_per_split(K)), "tall must keep the K order (split count and lengths)"
        for M in ms:
            if time.time() > deadline:
                print("  bits stopped: time budget spent", flush=True)
                report.data["bits_incomplete"] = True
                return not failures
            a, w, bias = _operands(N, K, M, gen)
            case = {"gemms": users, "N": N, "K": K, "M": M, "config": vars(cfg), "tall_config": vars(tall)}
            try:
                failures += _bits_case(case, a, w, bias, cfg, tall, with_bias=any(u.endswith("/qkv") for u in users))
                mark = ("OK  " if not case["bad_rows"]["n"] else "DIFF",
                        "OK" if not case["decode_bad_rows"]["n"] else "DIFF")
            except Exception as exc:  # e.g. a tile config that does not fit: recorded, the other cases still run
                case["error"] = repr(exc)[:300]
                failures.append(f"error {users[0]} N={N} K={K} M={M}: {case['error']}")
                mark = ("ERR ", "ERR")
            print(f"  {users[0]:34s} {N:6d} {K:5d} {M:5d} {cfg.split_k:5d} {tall.block_m:4d}x{tall.block_n:<5d} "
                  f"{mark[0]}  {mark[1]}{'' if mark == ('OK  ', 'OK') else '  <-- MISMATCH'}", flush=True)
            cases.append(case)
            report.put("bits", {"cases": cases, "failures": failures})
            del a, w, bias
    controls = {}
    try:
        failures += _controls(controls, ms, gen)
    except Exception as exc:
        controls["error"] = repr(exc)[:300]
        failures.append(f"control error: {controls['error']}")
    print(f"  controls: {controls}", flush=True)
    report.put("bits", {"cases": cases, "failures": failures, "controls": controls})
    return not failures


def _controls(controls: dict, ms: list[int], gen: torch.Generator) -> list[str]:
    """The comparison can fail (a tall launch with another split_k, i.e. other partial-sum boundaries,
    differs), and matmul.linear takes the tall path under VOSTI_TALL_GEMM=1 with the current path's bits.
    Half the block_k is recorded, not required to differ: on the H200 (session 4) a block_k 64 tall launch
    gave the block_k 128 bits, since the MMA chain accumulates the K steps in the same order either way."""
    from vosti_plugin.ops import matmul

    (N, K), users = next(iter(_shapes().items()))
    cfg = _current_config(N, K)
    failures = []
    a, w, _ = _operands(N, K, max(ms), gen)
    current = _launch("current", a, w, None, cfg)
    other_split = dataclasses.replace(_tall_config(N, K), split_k=cfg.split_k * 2)
    controls["other_split_k_differs"] = bool(_bad_rows(_launch("tall", a, w, None, other_split), current))
    if not controls["other_split_k_differs"]:
        failures.append(f"control {users[0]}: a tall launch with split_k {other_split.split_k} gave the same bits")
    other_k = dataclasses.replace(_tall_config(N, K), block_k=cfg.block_k // 2)
    controls["other_block_k_differs"] = bool(_bad_rows(_launch("tall", a, w, None, other_k), current))
    before = os.environ.get("VOSTI_TALL_GEMM")
    os.environ["VOSTI_TALL_GEMM"] = "1"
    try:
        rows = max(ms[-1], matmul.TALL_MIN_ROWS)
        a, w, _ = _operands(N, K, rows, gen)
        controls["api_tall_path_on"] = matmul.tall_path_on(rows, a.dtype)
        # on CPU linear widens to fp32 and takes the CPU catalog's config, not this script's smoke configs
        controls["api_linear_equals_current"] = (
            not _bad_rows(matmul.linear(a, w), _launch("current", a, w, None, cfg)) if DEVICE == "cuda" else None)
    finally:
        if before is None:
            os.environ.pop("VOSTI_TALL_GEMM", None)
        else:
            os.environ["VOSTI_TALL_GEMM"] = before
    if controls["api_linear_equals_current"] is False:
        failures.append(f"api {users[0]}: matmul.linear with VOSTI_TALL_GEMM=1 differs from the current path")
    return failures


def _time_us(fn) -> float:
    if DEVICE == "cpu":
        fn()
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e6
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=100) * 1e3


def section_timing(report: Report, ms: list[int], deadline: float) -> None:
    from vosti_plugin.ops import matmul

    rows = []
    gen = torch.Generator(device=DEVICE).manual_seed(1)
    print(f"  {'gemm':34s} {'N':>6s} {'K':>5s} {'M':>5s} {'cur_us':>9s} {'tall_us':>9s} {'cublas_us':>9s} "
          f"{'cur_TF':>6s} {'tall_TF':>7s} {'cub_TF':>6s} {'tall/cub':>8s}", flush=True)
    for (N, K), users in _shapes().items():
        cfg, tall = _current_config(N, K), _tall_config(N, K)
        for M in ms:
            if time.time() > deadline:
                print("  timing stopped: time budget spent", flush=True)
                return
            a, w, _ = _operands(N, K, M, gen)
            out = torch.empty(M, N, device=DEVICE, dtype=DTYPE)
            wt = w.t()
            try:
                t_cur = _time_us(lambda: matmul.launch_matmul(a, wt, None, out, cfg))
                t_tall = _time_us(lambda: matmul.launch_matmul_tall(a, wt, None, out, tall))
                t_cub = _time_us(lambda: torch.matmul(a, wt, out=out))
            except Exception as exc:
                report.error(f"timing_{N}x{K}_{M}", exc)
                continue
            flop = 2.0 * M * N * K
            tf = {k: flop / (t * 1e-6) / 1e12 for k, t in (("current", t_cur), ("tall", t_tall), ("cublas", t_cub))}
            rows.append({"gemms": users, "N": N, "K": K, "M": M, "split_k": cfg.split_k, "current_us": t_cur,
                         "tall_us": t_tall, "cublas_us": t_cub, "tflops": tf, "tall_over_cublas": t_tall / t_cub,
                         "tall_speedup": t_cur / t_tall})
            print(f"  {users[0]:34s} {N:6d} {K:5d} {M:5d} {t_cur:9.1f} {t_tall:9.1f} {t_cub:9.1f} "
                  f"{tf['current']:6.0f} {tf['tall']:7.0f} {tf['cublas']:6.0f} {t_tall / t_cub:8.2f}", flush=True)
            report.put("timing", rows)
            del a, w, out


def _smem_bytes(cfg) -> int:
    return (cfg.block_m * cfg.block_k + cfg.block_k * cfg.block_n) * DTYPE.itemsize * cfg.num_stages


def candidates(N: int, K: int) -> list:
    """Tall tile candidates for (N, K): the shipped tall config first, then the grid; K order kept."""
    tall = _tall_config(N, K)
    out = [tall]
    for bm in SWEEP_BLOCK_M:
        for bn in SWEEP_BLOCK_N:
            for warps in SWEEP_WARPS:
                for stages in SWEEP_STAGES:
                    c = dataclasses.replace(tall, block_m=bm, block_n=bn, num_warps=warps, num_stages=stages)
                    if c not in out:
                        out.append(c)
    return out


def section_sweep(report: Report, deadline: float) -> None:
    from vosti_plugin.ops import matmul

    results = {}
    gen = torch.Generator(device=DEVICE).manual_seed(2)
    print(f"\n  Tall tile sweep at M={SWEEP_M} (bits vs the current path; time per call)", flush=True)
    for (N, K), users in _shapes().items():
        if time.time() > deadline:
            print("  sweep stopped: time budget spent", flush=True)
            break
        cfg = _current_config(N, K)
        a, w, _ = _operands(N, K, SWEEP_M, gen)
        ref = _launch("current", a, w, None, cfg)
        out = torch.empty_like(ref)
        rows = []
        for cand in candidates(N, K):
            if time.time() > deadline:
                break
            row = {"config": vars(cand), "shipped": cand == _tall_config(N, K), "smem_bytes": _smem_bytes(cand)}
            if DEVICE == "cuda" and _smem_bytes(cand) > SMEM_BYTES:
                row["skipped"] = "shared memory"
                rows.append(row)
                continue
            try:
                got = _launch("tall", a, w, None, cand)
                row["bits_equal"] = not _bad_rows(got, ref)
                row["us"] = _time_us(lambda cand=cand: matmul.launch_matmul_tall(a, w.t(), None, out, cand))
                row["tflops"] = 2.0 * SWEEP_M * N * K / (row["us"] * 1e-6) / 1e12
            except Exception as exc:  # a candidate that does not compile or fit is data too
                row["error"] = repr(exc)[:300]
            rows.append(row)
            c = cand
            result = (f"{row['us']:9.1f}us {row['tflops']:6.0f}TF bits={'EQ' if row['bits_equal'] else 'DIFF'}"
                      if "us" in row else row.get("error", row.get("skipped", "")))
            print(f"  {users[0]:34s} bm={c.block_m:3d} bn={c.block_n:3d} bk={c.block_k:3d} w={c.num_warps} "
                  f"st={c.num_stages} {result}{'  <- shipped' if row['shipped'] else ''}", flush=True)
        equal = [r for r in rows if r.get("bits_equal")]
        best = min(equal, key=lambda r: r["us"]) if equal else None
        results[f"{N}x{K}"] = {"gemms": users, "N": N, "K": K, "split_k": cfg.split_k, "block_k": cfg.block_k,
                               "rows": rows, "best_bit_equal": best}
        if best:
            b = best["config"]
            print(f"  -> best bit-equal for {users[0]}: {b['block_m']}x{b['block_n']} w={b['num_warps']} "
                  f"st={b['num_stages']} {best['us']:.1f}us", flush=True)
        report.put("sweep", {"per_gemm": results, "per_tall_key": _best_per_key(results)})
        del a, w, ref, out


def _best_per_key(results: dict) -> dict:
    """Per tall_config key (block_k, split or not): the candidate tiles that are bit-equal on every GEMM with
    that key, ranked by their summed time there."""
    groups: dict[str, list[dict]] = {}
    for r in results.values():
        groups.setdefault(f"bk{r['block_k']}/{'split' if r['split_k'] > 1 else 'nosplit'}", []).append(r)
    out = {}
    for key, gemms in groups.items():
        totals: dict[str, float] = {}
        for i, g in enumerate(gemms):
            timed = {_tile_key(row["config"]): row for row in g["rows"]}
            for tile in list(totals) if i else list(timed):
                row = timed.get(tile)
                if row is None or not row.get("bits_equal"):
                    totals.pop(tile, None)
                else:
                    totals[tile] = totals.get(tile, 0.0) + row["us"]
        ranked = sorted(totals.items(), key=lambda kv: kv[1])
        out[key] = {"gemms": [f"{g['N']}x{g['K']}/split{g['split_k']}" for g in gemms], "ranked_total_us": ranked[:6]}
    return out


def _tile_key(cfg: dict) -> str:
    return f"{cfg['block_m']}x{cfg['block_n']}/w{cfg['num_warps']}/st{cfg['num_stages']}"


def _print_summary(sections: dict) -> None:
    timing = sections.get("timing", [])
    if timing:
        print("\n  timing summary (geometric means over the GEMMs):")
        for M in sorted({r["M"] for r in timing}):
            rows = [r for r in timing if r["M"] == M]
            speedup = math.exp(sum(math.log(r["tall_speedup"]) for r in rows) / len(rows))
            of_cublas = math.exp(sum(math.log(r["tall_over_cublas"]) for r in rows) / len(rows))
            print(f"    M={M:5d}: tall is {speedup:5.2f}x faster than the current path"
                  f" and takes {of_cublas:5.2f}x cuBLAS time", flush=True)
    for key, best in sections.get("sweep", {}).get("per_tall_key", {}).items():
        top = best["ranked_total_us"][:1]
        print(f"  sweep {key:13s} fastest tile bit-equal on all its GEMMs: "
              f"{top[0][0] + f' ({top[0][1]:.0f} us summed)' if top else 'none'}", flush=True)


def main() -> int:
    global DECODE_ROWS, SWEEP_M
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tall_gemm.json")
    ap.add_argument("--quick", action="store_true", help="M in {512, 4096} only")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--budget-s", type=float, default=540.0, help="stop starting new cases after this many seconds")
    ap.add_argument("--decode-rows", type=int, default=None,
                    help=f"rows per case recomputed by decode-sized launches (default {DECODE_ROWS}; 0: all)")
    ap.add_argument("--sweep-m", type=int, default=None, help=f"M of the tile sweep (default {SWEEP_M})")
    ap.add_argument("--cpu-smoke", action="store_true", help="run the script logic on CPU with tiny fp32 shapes")
    args = ap.parse_args()
    t0 = time.time()
    deadline = t0 + args.budget_s
    report = Report(args.out)
    if not device_ready(args.cpu_smoke, _use_cpu_smoke):
        return 2
    if args.decode_rows is not None:
        DECODE_ROWS = args.decode_rows if args.decode_rows > 0 else 1 << 62
    if args.sweep_m is not None:
        SWEEP_M = args.sweep_m
    import triton

    from vosti_plugin.ops import matmul

    gpu = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu (interpreter smoke run)"
    report.data["env"] = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
                          "gpu": gpu, "device": DEVICE, "dtype": str(DTYPE), "tall_min_rows": matmul.TALL_MIN_ROWS}
    print(f"env: {report.data['env']}", flush=True)
    if DEVICE == "cuda":
        missing = [nk for nk in _shapes() if (*nk, "bfloat16") not in matmul.CATALOG]
        report.data["not_in_catalog"] = missing
        if missing:
            print(f"  note: shapes missing from matmul.CATALOG (rule configs used): {missing}", flush=True)
    ms = ([m for m in M_VALUES if m in (512, 4096)] or M_VALUES[:1]) if args.quick else M_VALUES
    bits_ok = False
    sections = [("bits", lambda: section_bits(report, ms, deadline))]
    if not args.no_timing:
        sections.append(("timing", lambda: section_timing(report, ms, deadline)))
    if not args.no_sweep:
        sections.append(("sweep", lambda: section_sweep(report, deadline)))
    for name, run in sections:
        result = report.run_section(name, run, t0)
        if name == "bits":
            bits_ok = bool(result)
    failures = report.data["sections"].get("bits", {}).get("failures", [])
    report.data["bits_pass"] = bits_ok and not report.data.get("bits_incomplete", False)
    report.data["wall_s"] = time.time() - t0
    report.flush()
    _print_summary(report.data["sections"])
    for f in failures:
        print(f"MISMATCH: {f}")
    print(f"\nTALL BITS: {'PASS' if report.data['bits_pass'] else 'FAIL'}"
          f"{' (incomplete: budget)' if report.data.get('bits_incomplete') else ''}"
          f"   (errors in sections: {sorted(report.data['errors'])})")
    print(f"wrote {args.out} in {time.time() - t0:.0f}s")
    return 0 if report.data["bits_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
