"""vosti paged attention on a CUDA GPU: bf16 determinism properties (compiled Triton) + timings.

    python integration/gpu/attention_check.py --out $OUT/attention.json [--no-explore] [--budget-s 480]
    python integration/gpu/attention_check.py --cpu-smoke --out /tmp/attention.json   # logic check, no GPU

Sections (each isolated: a failure is recorded and the next one still runs; JSON is rewritten after each):
  1. properties, per geometry (Llama-3.1-8B: 32 q / 8 kv heads, head_dim 128, page 16;
     Gemma-3: 8 q / 4 kv heads, head_dim 256, page 16, sliding window 1024; plus Gemma with soft-cap 50
     and an fp32 Llama run), all compared BITWISE:
       batch       a request's rows alone == the same rows inside mixed prefill/decode batches
       prefill_decode  rows of one long prefill == the same positions computed by decode steps
       chunks      every chunk split of the prefill gives the prefill's rows
       pages       shuffled physical pages / vLLM-style [blocks, 2, page, heads, d] views give same rows
       paths       split-KV path (segments + combine) == fused path (in-register fold)
     plus `reference`: sampled rows against an fp64 softmax (tolerance printed) and a KV-write check.
  2. timings (Llama geometry, bf16, CUDA graphs and eager): decode batch 4 at 1K / 8K / 16K context,
     Gemma decode 4 x 16K (window 1024), prefill of 8K tokens; time, K/V bytes read, GB/s, % of 4.3 TB/s.
     Target: decode >= 70% of 4.3 TB/s at 4 x 16K. A device-to-device copy gives the measured ceiling.
  3. explore (unless --no-explore, while the budget lasts): other tile/segment configs for decode 4 x 16K
     and prefill 8K, to tune CATALOG offline (never at run time).
Prints PASS/FAIL for the properties and for the performance target; exit code 0 iff properties PASS.
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
from dataclasses import asdict, dataclass, replace

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

HBM_BYTES_PER_S = 4.3e12
DECODE_TARGET = 0.70


@dataclass(frozen=True)
class Geometry:
    name: str
    q_heads: int
    kv_heads: int
    head_dim: int
    page_size: int
    window: int | None = None
    soft_cap: float | None = None

    @property
    def queries_per_kv(self) -> int:
        return self.q_heads // self.kv_heads


@dataclass(frozen=True)
class Sizes:
    prefill_len: int  # one long prompt used by prefill_decode / chunks
    decode_positions: tuple[int, ...]
    chunk_splits: tuple[tuple[int, ...], ...]
    batch_targets: tuple[tuple[int, int], ...]  # (kv_len, q_len)
    neighbours: tuple[tuple[int, int], ...]
    reference_rows: int


GPU_SIZES = Sizes(
    prefill_len=2500,
    decode_positions=(0, 1, 15, 16, 17, 511, 512, 513, 1023, 1024, 1025, 1535, 2047, 2048, 2300, 2499),
    chunk_splits=((512, 1300), (1, 17, 1024, 2047), (700,)),
    batch_targets=((3000, 1), (2000, 300), (1100, 1100)),
    neighbours=((100, 1), (700, 700), (5000, 1), (1200, 64), (17, 17), (2600, 1)),
    reference_rows=24,
)
SMOKE_SIZES = Sizes(
    prefill_len=21,
    decode_positions=(0, 7, 8, 9, 20),
    chunk_splits=((5, 13),),
    batch_targets=((20, 1), (17, 5)),
    neighbours=((3, 1), (9, 9)),
    reference_rows=6,
)


class Report:
    def __init__(self, path: str) -> None:
        self.path = path
        self.data: dict = {"env": {}, "properties": {}, "timings": {}, "explore": [], "errors": {}}

    def error(self, section: str, exc: BaseException) -> None:
        self.data["errors"][section] = "".join(traceback.format_exception(exc))[-4000:]
        print(f"[ERROR] {section}: {exc!r}", flush=True)

    def flush(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w") as f:
            json.dump(self.data, f, indent=1, default=str)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="attention_check.json")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny fp32 run through the Triton interpreter")
    parser.add_argument("--no-explore", action="store_true")
    parser.add_argument("--budget-s", type=float, default=480.0, help="stop exploring after this many seconds")
    args = parser.parse_args()
    if args.cpu_smoke:
        os.environ["TRITON_INTERPRET"] = "1"

    import torch

    started = time.time()
    report = Report(args.out)
    smoke = args.cpu_smoke
    if not smoke and not torch.cuda.is_available():
        print("FAIL: no CUDA device (use --cpu-smoke for a logic check)", flush=True)
        report.data["errors"]["setup"] = "no CUDA device"
        report.flush()
        return 2
    device = "cpu" if smoke else "cuda"
    report.data["env"] = _environment(torch, device, smoke)
    report.flush()

    import warnings

    warnings.filterwarnings("ignore", category=RuntimeWarning)
    checks = PropertyChecks(torch, device, smoke)
    property_pass = checks.run_all(report)

    perf = None
    if not smoke:
        try:
            perf = run_timings(torch, report)
        except Exception as exc:  # noqa: BLE001
            report.error("timings", exc)
        if not args.no_explore:
            try:
                run_explore(torch, report, deadline=started + args.budget_s)
            except Exception as exc:  # noqa: BLE001
                report.error("explore", exc)
    report.data["summary"] = {
        "properties": "PASS" if property_pass else "FAIL",
        "decode_4x16k_target": perf,
        "wall_s": round(time.time() - started, 1),
    }
    report.flush()
    _print_summary(report)
    return 0 if property_pass else 1


def _environment(torch, device, smoke) -> dict:
    import triton

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "mode": "cpu-smoke (interpreter, fp32)" if smoke else "cuda",
    }
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name()
        env["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    return env


# ----------------------------------------------------------------------------------------------------------
# properties


class PropertyChecks:
    def __init__(self, torch, device: str, smoke: bool) -> None:
        from vosti_plugin.attention import paged_batch as reference
        from vosti_plugin.integration.reference_attention import reference_attention
        from vosti_plugin.attention.config import AttentionLaunchConfig, select_config
        from vosti_plugin.attention.kv_write import write_kv

        self.torch = torch
        self.device = device
        self.smoke = smoke
        self.ref = reference
        self.reference_attention = reference_attention
        self.write_kv = write_kv
        self.sizes = SMOKE_SIZES if smoke else GPU_SIZES
        if smoke:
            tiny = AttentionLaunchConfig(block_q=2, block_m=8, block_n=4, segment=8, num_warps=4, num_stages=1)
            tiny_gemma = replace(tiny, block_m=4)
            self.runs = [
                ("llama-like", Geometry("llama-like", 8, 2, 16, 4), torch.float32, tiny),
                ("gemma-like", Geometry("gemma-like", 4, 2, 32, 4, window=13), torch.float32, tiny_gemma),
                ("gemma-like-softcap", Geometry("gemma-like", 4, 2, 32, 4, window=13, soft_cap=5.0),
                 torch.float32, tiny_gemma),
            ]
        else:
            llama = Geometry("llama-3.1-8b", 32, 8, 128, 16)
            gemma = Geometry("gemma-3", 8, 4, 256, 16, window=1024)
            self.runs = [
                ("llama-3.1-8b bf16", llama, torch.bfloat16, None),
                ("gemma-3 bf16 window 1024", gemma, torch.bfloat16, None),
                ("gemma-3 bf16 window 1024 softcap 50", replace(gemma, soft_cap=50.0), torch.bfloat16, None),
                ("llama-3.1-8b fp32", llama, torch.float32, None),
            ]
        self.select_config = select_config

    def run_all(self, report: Report) -> bool:
        all_pass = True
        for label, geometry, dtype, config in self.runs:
            config = config or self.select_config(
                geometry.head_dim, geometry.q_heads, geometry.kv_heads, geometry.page_size, dtype
            )
            results = report.data["properties"].setdefault(label, {"config": asdict(config)})
            for name in ("reference", "batch", "prefill_decode", "chunks", "pages", "paths"):
                t0 = time.time()
                try:
                    result = getattr(self, "check_" + name)(geometry, dtype, config)
                except Exception as exc:  # noqa: BLE001
                    report.error(f"{label}/{name}", exc)
                    result = {"pass": False, "error": repr(exc)}
                result["seconds"] = round(time.time() - t0, 2)
                results[name] = result
                all_pass &= bool(result["pass"])
                print(f"  [{'PASS' if result['pass'] else 'FAIL'}] {label:38s} {name:15s} "
                      f"{_brief(result)}", flush=True)
                report.flush()
        try:
            result = self.check_kv_write()
        except Exception as exc:  # noqa: BLE001
            report.error("kv_write", exc)
            result = {"pass": False, "error": repr(exc)}
        report.data["properties"]["kv_write"] = result
        all_pass &= bool(result["pass"])
        print(f"  [{'PASS' if result['pass'] else 'FAIL'}] kv_write {_brief(result)}", flush=True)
        report.flush()
        return all_pass

    # helpers
    def request(self, geometry: Geometry, dtype, kv_len: int, q_len: int, seed: int):
        return self.ref.random_request(
            kv_len, q_len, geometry.q_heads, geometry.kv_heads, geometry.head_dim,
            seed=seed, dtype=dtype, device=self.device,
        )

    def run(self, requests, geometry, config, *, seed=0, path="split", fused_kv=False, padding_rows=0):
        batch = self.ref.build_paged_batch(
            requests, page_size=geometry.page_size, seed=seed, fused_kv=fused_kv, padding_rows=padding_rows
        )
        return self.ref.run_paged_batch(
            batch, config, scale=geometry.head_dim ** -0.5, sliding_window=geometry.window,
            soft_cap=geometry.soft_cap, path=path,
        )

    def compare(self, pairs) -> dict:
        """pairs: (label, a, b) -> all bitwise equal? plus mismatch statistics."""
        mismatched_rows, total_rows, max_diff, failures = 0, 0, 0.0, []
        for label, a, b in pairs:
            equal = self.ref.bitwise_equal(a, b)
            total_rows += a.shape[0]
            if not equal:
                rows = (a.float() != b.float()).flatten(1).any(dim=1)
                mismatched_rows += int(rows.sum())
                max_diff = max(max_diff, float((a.float() - b.float()).abs().nan_to_num(1e30).max()))
                failures.append(label)
        return {
            "pass": not failures, "compared_rows": total_rows, "mismatched_rows": mismatched_rows,
            "max_abs_diff": max_diff, "failures": failures[:10],
        }

    def prompt(self, geometry, dtype):
        return self.request(geometry, dtype, self.sizes.prefill_len, self.sizes.prefill_len, seed=11)

    # checks
    def check_reference(self, geometry, dtype, config) -> dict:
        torch = self.torch
        prompt = self.prompt(geometry, dtype)
        decode = self.request(geometry, dtype, self.sizes.batch_targets[0][0], 1, seed=12)
        outputs = self.run([prompt, decode], geometry, config)
        gen = torch.Generator().manual_seed(3)
        rows = torch.randperm(prompt.q_len, generator=gen)[: self.sizes.reference_rows]
        rows = torch.cat([rows, torch.tensor([0, prompt.q_len - 1])]).unique()
        worst, bound_fail = 0.0, 0
        tol = 2e-5 if dtype == torch.float32 else 2e-2
        for request, out, take in ((prompt, outputs[0], rows.to(self.device)), (decode, outputs[1], None)):
            q = request.queries if take is None else request.queries[take]
            pos = request.positions() if take is None else request.positions()[take.cpu()]
            got = out if take is None else out[take]
            expected = self.reference_attention(
                q, request.keys, request.values, pos, scale=geometry.head_dim ** -0.5,
                sliding_window=geometry.window, soft_cap=geometry.soft_cap,
            )
            err = (got.double() - expected).abs()
            worst = max(worst, float(err.max()))
            bound_fail += int((err > tol + tol * expected.abs()).sum())
        return {"pass": bound_fail == 0, "max_abs_err": worst, "tolerance": f"atol=rtol={tol}",
                "out_of_tolerance": bound_fail}

    def check_batch(self, geometry, dtype, config) -> dict:
        targets = [self.request(geometry, dtype, kv, q, seed=20 + i) for i, (kv, q) in enumerate(self.sizes.batch_targets)]
        others = [self.request(geometry, dtype, kv, q, seed=40 + i) for i, (kv, q) in enumerate(self.sizes.neighbours)]
        pairs = []
        for t_index, target in enumerate(targets):
            alone = {path: self.run([target], geometry, config, seed=1, path=path)[0] for path in ("split", "fused")}
            for variant in range(3):
                k = (variant + t_index) % (len(others) + 1)
                mix = others[variant:] + others[:variant]
                batch = mix[:k] + [target] + mix[k:]
                for path in ("split", "fused"):
                    out = self.run(batch, geometry, config, seed=variant + 2, path=path, padding_rows=variant)[k]
                    pairs.append((f"target{t_index}/mix{variant}/{path}", alone[path], out))
                    pairs.append((f"target{t_index}/mix{variant}/{path}-vs-split-alone", alone["split"], out))
        return self.compare(pairs)

    def check_prefill_decode(self, geometry, dtype, config) -> dict:
        prompt = self.prompt(geometry, dtype)
        positions = [p for p in self.sizes.decode_positions if p < prompt.q_len]
        neighbour = self.request(geometry, dtype, 900, 1, seed=13)
        pairs = []
        for prefill_path in ("fused", "split"):
            prefill = self.run([prompt], geometry, config, path=prefill_path)[0]
            for decode_path in ("split", "fused"):
                steps = [prompt.chunk(p, p + 1) for p in positions]
                decoded = self.run(steps + [neighbour], geometry, config, seed=5, path=decode_path)
                for p, row in zip(positions, decoded):
                    pairs.append((f"pos{p}/{prefill_path}-prefill/{decode_path}-decode", prefill[p : p + 1], row))
        return self.compare(pairs)

    def check_chunks(self, geometry, dtype, config) -> dict:
        prompt = self.prompt(geometry, dtype)
        whole = self.run([prompt], geometry, config)[0]
        neighbours = [self.request(geometry, dtype, 300, 1, seed=14), self.request(geometry, dtype, 64, 64, seed=15)]
        pairs = []
        for split_index, cuts in enumerate(self.sizes.chunk_splits):
            bounds = [0, *cuts, prompt.q_len]
            for begin, end in zip(bounds[:-1], bounds[1:]):
                rows = self.run([neighbours[0], prompt.chunk(begin, end), neighbours[1]], geometry, config,
                                seed=begin + 7)[1]
                pairs.append((f"split{split_index}/[{begin},{end})", whole[begin:end], rows))
        return self.compare(pairs)

    def check_pages(self, geometry, dtype, config) -> dict:
        requests = [self.request(geometry, dtype, kv, q, seed=30 + i) for i, (kv, q) in enumerate(self.sizes.batch_targets)]
        base = self.run(requests, geometry, config, seed=0)
        pairs = []
        for seed, fused_kv in ((1, False), (2, True), (3, True)):
            other = self.run(requests, geometry, config, seed=seed, fused_kv=fused_kv)
            pairs += [(f"seed{seed}/fused_kv={fused_kv}/req{i}", a, b) for i, (a, b) in enumerate(zip(base, other))]
        return self.compare(pairs)

    def check_paths(self, geometry, dtype, config) -> dict:
        requests = [self.request(geometry, dtype, kv, q, seed=50 + i)
                    for i, (kv, q) in enumerate(self.sizes.batch_targets + self.sizes.neighbours)]
        split = self.run(requests, geometry, config, path="split")
        fused = self.run(requests, geometry, config, path="fused")
        return self.compare([(f"req{i}", a, b) for i, (a, b) in enumerate(zip(split, fused))])

    def check_kv_write(self) -> dict:
        torch = self.torch
        dtype = torch.float32 if self.smoke else torch.bfloat16
        gen = torch.Generator().manual_seed(0)
        blocks, page, heads, dim = 64, 16, 8, 128
        kv = torch.randn(blocks, 2, page, heads, dim, generator=gen).to(self.device, dtype)
        k_cache, v_cache = kv.unbind(1)
        slots = torch.randperm(blocks * page, generator=gen)[:300]
        slots[::7] = -1
        key = torch.randn(300, heads, dim, generator=gen).to(self.device, dtype)
        value = torch.randn(300, heads, dim, generator=gen).to(self.device, dtype)
        expected = kv.clone()
        for t, s in enumerate(slots.tolist()):
            if s >= 0:
                expected[s // page, 0, s % page] = key[t]
                expected[s // page, 1, s % page] = value[t]
        self.write_kv(key, value, k_cache, v_cache, slots.to(self.device))
        return {"pass": self.ref.bitwise_equal(kv, expected), "tokens": 300, "skipped": int((slots < 0).sum())}


def _brief(result: dict) -> str:
    keys = ("compared_rows", "mismatched_rows", "max_abs_diff", "max_abs_err", "tolerance", "error", "failures")
    return " ".join(f"{k}={result[k]}" for k in keys if k in result and result[k] not in ([], None))


# ----------------------------------------------------------------------------------------------------------
# timings


def _synthetic(torch, geometry: Geometry, kv_lens, q_lens, dtype, seed=0):
    """Random paged batch built directly on the GPU (no fp64 reference needed for timing)."""
    page = geometry.page_size
    pages = [math.ceil(n / page) for n in kv_lens]
    num_blocks = sum(pages) + 1
    gen = torch.Generator(device="cuda").manual_seed(seed)
    kv = torch.randn(num_blocks, 2, page, geometry.kv_heads, geometry.head_dim, device="cuda", dtype=dtype,
                     generator=gen)
    k_cache, v_cache = kv.unbind(1)
    perm = torch.randperm(num_blocks, device="cuda", generator=gen).to(torch.int32)
    block_table = torch.zeros(len(kv_lens), max(pages), dtype=torch.int32, device="cuda")
    start = 0
    for s, n in enumerate(pages):
        block_table[s, :n] = perm[start : start + n]
        start += n
    q = torch.randn(sum(q_lens), geometry.q_heads, geometry.head_dim, device="cuda", dtype=dtype, generator=gen)
    qsl = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    seq_lens = torch.tensor(kv_lens, dtype=torch.int32, device="cuda")
    return q, k_cache, v_cache, block_table, seq_lens, qsl


def _time_ms(torch, fn, iters=30, warmup=5, graph=False) -> float:
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        run = g.replay
    else:
        run = fn
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def _kv_bytes(kv_lens, q_lens, geometry, elem) -> int:
    """K and V bytes a causal pass must read at least: every key visible to some row, once per KV head."""
    total = 0
    for kv, q in zip(kv_lens, q_lens):
        lo = max(0, kv - q + 1 - geometry.window) if geometry.window else 0
        total += (kv - lo) * geometry.kv_heads * geometry.head_dim * 2 * elem
    return total


def _attention_fn(torch, geometry, dtype, kv_lens, q_lens, config, path="split", seed=0):
    from vosti_plugin.attention.paged_attention import (
        num_kv_segments,
        paged_attention,
        split_workspace_numel,
    )

    q, k_cache, v_cache, block_table, seq_lens, qsl = _synthetic(torch, geometry, kv_lens, q_lens, dtype, seed)
    out = torch.empty_like(q)
    max_kv = max(kv_lens)
    workspace = None
    if path == "split":
        segments = num_kv_segments(block_table, geometry.page_size, config.segment, max_kv)
        workspace = torch.empty(split_workspace_numel(q.shape[0], geometry.q_heads, geometry.head_dim, segments),
                                dtype=torch.float32, device="cuda")

    def fn():
        paged_attention(q, k_cache, v_cache, block_table, seq_lens, qsl, out, scale=geometry.head_dim ** -0.5,
                        config=config, sliding_window=geometry.window, soft_cap=geometry.soft_cap,
                        max_seqlen_k=max_kv, workspace=workspace, path=path)

    return fn


def _measure(torch, label, geometry, dtype, kv_lens, q_lens, config, path="split", graph=True) -> dict:
    fn = _attention_fn(torch, geometry, dtype, kv_lens, q_lens, config, path=path)
    elem = torch.finfo(dtype).bits // 8
    kv_bytes = _kv_bytes(kv_lens, q_lens, geometry, elem)
    flops = 0
    for kv, q in zip(kv_lens, q_lens):
        visible = torch.arange(kv - q + 1, kv + 1, dtype=torch.float64)  # keys seen by each row
        if geometry.window:
            visible = visible.clamp(max=geometry.window)
        flops += 4 * float(visible.sum()) * geometry.q_heads * geometry.head_dim
    eager_ms = _time_ms(torch, fn)
    result = {
        "label": label, "path": path, "kv_lens": kv_lens[:4], "q_lens": q_lens[:4], "num_seqs": len(kv_lens),
        "config": asdict(config), "eager_ms": round(eager_ms, 4), "kv_bytes": kv_bytes,
    }
    best = eager_ms
    if graph:
        try:
            graph_ms = _time_ms(torch, fn, graph=True)
            result["graph_ms"] = round(graph_ms, 4)
            best = min(best, graph_ms)
        except Exception as exc:  # noqa: BLE001
            result["graph_error"] = repr(exc)
    result["best_ms"] = round(best, 4)
    result["kv_GBps"] = round(kv_bytes / (best * 1e-3) / 1e9, 1)
    result["pct_of_4.3TBps"] = round(100 * kv_bytes / (best * 1e-3) / HBM_BYTES_PER_S, 1)
    result["TFLOPs"] = round(flops / (best * 1e-3) / 1e12, 1)
    print(f"  {label:34s} {path:5s} best {best:8.3f} ms  eager {eager_ms:8.3f}  KV {kv_bytes / 1e6:8.1f} MB  "
          f"{result['kv_GBps']:7.0f} GB/s ({result['pct_of_4.3TBps']:5.1f}%)  {result['TFLOPs']:6.1f} TFLOP/s",
          flush=True)
    return result


def run_timings(torch, report: Report):
    from vosti_plugin.attention.config import select_config

    llama = Geometry("llama-3.1-8b", 32, 8, 128, 16)
    gemma = Geometry("gemma-3", 8, 4, 256, 16, window=1024)
    dtype = torch.bfloat16
    timings = report.data["timings"]
    print("timings (bf16):", flush=True)

    try:
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        ms = _time_ms(torch, lambda: dst.copy_(src), iters=10)
        timings["copy_1GiB"] = {"ms": ms, "GBps_read_plus_write": round(2 * src.numel() / (ms * 1e-3) / 1e9, 1)}
        print(f"  device copy 1 GiB: {ms:.3f} ms = {timings['copy_1GiB']['GBps_read_plus_write']} GB/s (r+w)",
              flush=True)
        del src, dst
    except Exception as exc:  # noqa: BLE001
        report.error("timings/copy", exc)

    llama_config = select_config(128, 32, 8, 16, dtype)
    gemma_config = select_config(256, 8, 4, 16, dtype)
    cases = [
        ("decode llama 4x1K", llama, [1024] * 4, [1] * 4, llama_config, "split"),
        ("decode llama 4x8K", llama, [8192] * 4, [1] * 4, llama_config, "split"),
        ("decode llama 4x16K", llama, [16384] * 4, [1] * 4, llama_config, "split"),
        ("decode llama 4x16K fused path", llama, [16384] * 4, [1] * 4, llama_config, "fused"),
        ("decode llama 64x2K", llama, [2048] * 64, [1] * 64, llama_config, "split"),
        ("decode gemma 4x16K win1024", gemma, [16384] * 4, [1] * 4, gemma_config, "split"),
        ("prefill llama 8K", llama, [8192], [8192], llama_config, "split"),
        ("prefill llama 8K split path", llama, [8192], [8192], llama_config, "split"),
        ("prefill gemma 8K win1024", gemma, [8192], [8192], gemma_config, "split"),
    ]
    for label, geometry, kv_lens, q_lens, config, path in cases:
        try:
            timings[label] = _measure(torch, label, geometry, dtype, kv_lens, q_lens, config, path=path,
                                      graph=q_lens[0] == 1)
        except Exception as exc:  # noqa: BLE001
            report.error(f"timings/{label}", exc)
        report.flush()

    try:  # reference point: torch SDPA (flash) causal prefill on dense K/V, same geometry
        import torch.nn.functional as F

        q = torch.randn(1, 32, 8192, 128, device="cuda", dtype=dtype)
        k = torch.randn(1, 8, 8192, 128, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        ms = _time_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), iters=10)
        timings["prefill 8K torch sdpa (dense, reference point)"] = {"best_ms": round(ms, 4)}
        print(f"  prefill 8K torch SDPA dense (reference point): {ms:.3f} ms", flush=True)
    except Exception as exc:  # noqa: BLE001
        report.error("timings/sdpa", exc)
    report.flush()

    target = timings.get("decode llama 4x16K")
    if not target:
        return {"verdict": "UNKNOWN (no measurement)"}
    pct = target["pct_of_4.3TBps"]
    return {"pct_of_4.3TBps": pct, "target_pct": 100 * DECODE_TARGET,
            "verdict": "PASS" if pct >= 100 * DECODE_TARGET else "FAIL"}


def run_explore(torch, report: Report, deadline: float) -> None:
    from vosti_plugin.attention.config import AttentionLaunchConfig

    llama = Geometry("llama-3.1-8b", 32, 8, 128, 16)
    dtype = torch.bfloat16
    print("explore (informational, offline tuning of CATALOG):", flush=True)
    decode_variants = [
        (16, 64, 512, 4, 2), (16, 64, 256, 4, 2), (32, 64, 256, 4, 2), (32, 64, 1024, 4, 2),
        (32, 128, 512, 4, 2), (32, 128, 512, 8, 2), (32, 64, 512, 4, 3), (16, 128, 1024, 4, 3),
        (32, 32, 512, 4, 2), (64, 64, 512, 4, 2), (16, 64, 128, 4, 2), (32, 128, 1024, 8, 3),
    ]
    prefill_variants = [(64, 64, 512, 4, 2), (64, 64, 512, 8, 2), (128, 64, 512, 8, 2), (64, 128, 512, 8, 2),
                        (128, 128, 512, 8, 2), (64, 64, 512, 4, 3), (128, 64, 1024, 8, 3)]
    jobs = [("decode llama 4x16K", [16384] * 4, [1] * 4, v) for v in decode_variants]
    jobs += [("decode llama 4x1K", [1024] * 4, [1] * 4, v) for v in decode_variants[:4]]
    jobs += [("prefill llama 8K", [8192], [8192], v) for v in prefill_variants]
    for label, kv_lens, q_lens, (block_m, block_n, segment, warps, stages) in jobs:
        if time.time() > deadline:
            print("  (explore stopped: time budget)", flush=True)
            break
        config = AttentionLaunchConfig(block_q=block_m // 4, block_m=block_m, block_n=block_n, segment=segment,
                                       num_warps=warps, num_stages=stages)
        try:
            result = _measure(torch, f"{label} m{block_m} n{block_n} s{segment} w{warps} st{stages}", llama, dtype,
                              kv_lens, q_lens, config, graph=q_lens[0] == 1)
            report.data["explore"].append(result)
        except Exception as exc:  # noqa: BLE001
            report.data["explore"].append({"label": label, "config": asdict(config), "error": repr(exc)[:500]})
            print(f"  {label} {config}: ERROR {exc!r}"[:300], flush=True)
        report.flush()


def _print_summary(report: Report) -> None:
    data = report.data
    print("\n================ attention_check summary ================", flush=True)
    for label, results in data["properties"].items():
        if label == "kv_write":
            print(f"  kv_write: {'PASS' if results['pass'] else 'FAIL'}")
            continue
        states = " ".join(f"{k}={'PASS' if v['pass'] else 'FAIL'}" for k, v in results.items() if k != "config")
        print(f"  {label}: {states}")
    for label, t in data["timings"].items():
        if "best_ms" in t and "kv_GBps" in t:
            print(f"  {label:34s} {t['best_ms']:8.3f} ms {t['kv_GBps']:7.0f} GB/s {t['pct_of_4.3TBps']:5.1f}%")
    explore = [e for e in data["explore"] if "best_ms" in e]
    for prefix in ("decode llama 4x16K", "decode llama 4x1K", "prefill llama 8K"):
        best = sorted((e for e in explore if e["label"].startswith(prefix)), key=lambda e: e["best_ms"])[:3]
        for e in best:
            print(f"  explore best: {e['label']:52s} {e['best_ms']:8.3f} ms ({e['pct_of_4.3TBps']}%)")
    if data["errors"]:
        print(f"  errors in: {', '.join(data['errors'])}")
    summary = data["summary"]
    print(f"PROPERTIES: {summary['properties']}")
    perf = summary["decode_4x16k_target"]
    if perf:
        print(f"DECODE 4x16K TARGET (>= {100 * DECODE_TARGET:.0f}% of 4.3 TB/s): {perf.get('verdict')} "
              f"({perf.get('pct_of_4.3TBps')}%)")
    print(f"JSON: {report.path}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
