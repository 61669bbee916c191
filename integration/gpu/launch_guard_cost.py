"""Cost of the runtime launch guard (vosti_plugin/launch/guard.py) per decode step, Llama-3.1-8B geometry.

    python integration/gpu/launch_guard_cost.py --out DIR [--batches 1,16,64] [--context 1024] [--cpu-smoke]

One decode step of a 32-layer Llama-3.1-8B (bf16, weights re-drawn N(0, 1/fan_in)) is run eagerly through
vosti's launch wrappers, layer by layer as vLLM's model runner calls them: rms_norm, qkv linear, write_kv,
paged attention (split path: segments + combine), o linear, fused add+rms_norm, gate_up linear,
silu_and_mul, down linear; then the final norm, lm_head and log_softmax. For each batch it reports
  - guard calls per step (counted by wrapping guard.check) and the guard's cost per call (each recorded
    call replayed 20,000 times, armed, already-seen call sites: the steady state of a served engine);
  - calls x cost as a fraction of the eager step time (CUDA-synchronised wall time, median of N steps);
  - the eager step time with the guard armed vs disarmed (end to end, same process, interleaved);
  - the control: the same step with stock torch ops (F.linear / SDPA-free reference is not needed: the
    guard is host-side only, so the control is the disarmed run; torch F.linear step time is printed for
    scale).
Under CUDA graphs (vLLM's default decode path) the wrappers do not run per replayed step, so the guard's
per-step cost there is 0; the eager step is the worst case. The decision rule: guard on by default if
calls x cost < 1 % of the step time at every batch (guard.ON_BY_DEFAULT), else only with VOSTI_AUDIT=1.
The guard is armed with the cached proofs of the installed kernel sources when there are some (run `vosti
verify` first), else with every catalog config marked proved (the lookup cost is the same; noted in JSON).
--cpu-smoke: a tiny 2-layer geometry on CPU through the Triton interpreter (checks this script; the
timings mean nothing there except the per-call guard cost).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

GEOMETRY = {"layers": 32, "hidden": 4096, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "intermediate": 14336,
            "vocab": 128256, "page": 16}
SMOKE = {"layers": 2, "hidden": 128, "q_heads": 8, "kv_heads": 2, "head_dim": 64, "intermediate": 256,
         "vocab": 512, "page": 16}


def _args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--context", type=int, default=1024, help="cached tokens per sequence")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--cpu-smoke", action="store_true")
    return ap.parse_args()


def main() -> int:
    args = _args()
    if args.cpu_smoke:
        os.environ["TRITON_INTERPRET"] = "1"
        args.batches, args.context, args.steps = "1,4", 64, 2
    import torch

    from vosti_plugin.attention import config as attention_config
    from vosti_plugin.attention import kv_write, paged_attention
    from vosti_plugin.launch import guard
    from vosti_plugin.ops import activation, matmul, rmsnorm, softmax

    g = SMOKE if args.cpu_smoke else GEOMETRY
    device = "cpu" if args.cpu_smoke else "cuda"
    dtype = torch.float32 if args.cpu_smoke else torch.bfloat16
    sync = (lambda: None) if device == "cpu" else torch.cuda.synchronize
    torch.manual_seed(0)

    def weight(n, k):
        return (torch.randn(n, k, device=device) / k ** 0.5).to(dtype)

    H, D, QH, KH = g["hidden"], g["head_dim"], g["q_heads"], g["kv_heads"]
    layers = [{"qkv": weight((QH + 2 * KH) * D, H), "o": weight(H, QH * D), "gate_up": weight(2 * g["intermediate"], H),
               "down": weight(H, g["intermediate"]), "n1": torch.ones(H, device=device, dtype=dtype),
               "n2": torch.ones(H, device=device, dtype=dtype)} for _ in range(g["layers"])]
    lm_head = weight(g["vocab"], H)
    att_cfg = attention_config.select_config(D, QH, KH, g["page"], dtype)

    proofs = "cached"
    from vosti_plugin.verifier.api import cached_results

    results = cached_results()
    if results is None:
        from vosti_plugin.verifier.api import catalog_entries
        from vosti_plugin.verifier.report import Result

        proofs = "none cached: every catalog config marked proved (lookup cost only)"
        results = [Result(e["kernel"].fn.__name__, c, "g", "proved", "", 0, "", 0.0)
                   for e in catalog_entries() for c, _ in e["configs"]]
        results += [Result(f"launch:{m}", {}, "l", "proved", "", 0, "", 0.0)
                    for m in ("matmul", "rmsnorm", "softmax", "activation", "paged_attention", "kv_write")]

    def make_batch(B):
        pages_per_seq = -(-(args.context + 1) // g["page"])
        kc = torch.randn(B * pages_per_seq + 1, g["page"], KH, D, device=device, dtype=dtype)
        vc = torch.randn_like(kc)
        caches = [(kc, vc) for _ in range(g["layers"])]  # one cache tensor pair shared: same work per layer
        bt = torch.arange(B * pages_per_seq, device=device, dtype=torch.int32).view(B, pages_per_seq)
        lens = torch.full((B,), args.context + 1, device=device, dtype=torch.int32)
        qsl = torch.arange(B + 1, device=device, dtype=torch.int32)
        slots = (bt[:, args.context // g["page"]] * g["page"] + args.context % g["page"]).long()
        x = torch.randn(B, H, device=device, dtype=dtype)
        return x, caches, bt, lens, qsl, slots

    def step(x, caches, bt, lens, qsl, slots):
        B = x.shape[0]
        res = x
        h = rmsnorm.rms_norm(x, layers[0]["n1"], 1e-5)
        for w, (kc, vc) in zip(layers, caches):
            qkv = matmul.linear(h, w["qkv"])
            q, k, v = qkv.split([QH * D, KH * D, KH * D], dim=-1)
            kv_write.write_kv(k.reshape(B, KH, D).contiguous(), v.reshape(B, KH, D).contiguous(), kc, vc, slots)
            out = torch.empty(B, QH, D, device=device, dtype=dtype)
            paged_attention.paged_attention(q.reshape(B, QH, D).contiguous(), kc, vc, bt, lens, qsl, out,
                                            scale=D ** -0.5, config=att_cfg, path="split")
            o = matmul.linear(out.reshape(B, QH * D), w["o"])
            h, res = rmsnorm.fused_add_rms_norm(o, res, w["n2"], 1e-5)
            a = activation.silu_and_mul(matmul.linear(h, w["gate_up"]))
            d = matmul.linear(a, w["down"])
            h, res = rmsnorm.fused_add_rms_norm(d, res, w["n1"], 1e-5)
        return softmax.log_softmax(matmul.linear(h, lm_head).float())

    def torch_step(x):  # the same GEMMs through cuBLAS, for scale (no attention)
        h = x
        for w in layers:
            qkv = torch.nn.functional.linear(h, w["qkv"])
            h = torch.nn.functional.linear(qkv[:, : QH * D], w["o"])
            gu = torch.nn.functional.linear(h, w["gate_up"])
            h = torch.nn.functional.linear(torch.nn.functional.silu(gu[:, : g["intermediate"]]) * gu[:, g["intermediate"]:],
                                           w["down"])
        return torch.nn.functional.linear(h, lm_head)

    recorded: list = []
    real_check = guard.check

    def counting(kernel, grid, **kw):
        recorded.append((kernel, grid, kw))
        return real_check(kernel, grid, **kw)

    def timed(fn, *a):
        sync()
        t0 = time.perf_counter()
        fn(*a)
        sync()
        return time.perf_counter() - t0

    out = {"geometry": g, "dtype": str(dtype), "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
           "context": args.context, "proofs": proofs, "cpu_smoke": args.cpu_smoke, "batches": {}}
    for B in [int(b) for b in args.batches.split(",")]:
        batch = make_batch(B)
        guard.arm(results)
        step(*batch)  # warm-up: compiles, and every call site enters the guard's seen set
        recorded.clear()
        guard.check = counting
        step(*batch)
        guard.check = real_check
        calls = list(recorded)
        n = 20000 if not args.cpu_smoke else 2000
        per_call = [timeit.timeit(lambda c=c: real_check(c[0], c[1], **c[2]), number=n) / n for c in calls[:64]]
        per_call_s = statistics.median(per_call)
        on, off = [], []
        for _ in range(args.steps):  # interleaved so drift hits both
            guard.arm(results)
            on.append(timed(step, *batch))
            guard.disarm()
            off.append(timed(step, *batch))
        guard.disarm()
        step_off = statistics.median(off)
        cost = len(calls) * per_call_s
        row = {"guard_calls_per_step": len(calls), "guard_seconds_per_call": per_call_s,
               "guard_seconds_per_step": cost, "step_seconds_guard_off": step_off,
               "step_seconds_guard_on": statistics.median(on),
               "guard_fraction_of_step": cost / step_off,
               "end_to_end_fraction": (statistics.median(on) - step_off) / step_off,
               "calls_by_kernel": {}}
        for k, _gr, _kw in calls:
            row["calls_by_kernel"][k.fn.__name__] = row["calls_by_kernel"].get(k.fn.__name__, 0) + 1
        if device == "cuda":
            torch_step(batch[0])
            row["torch_linear_step_seconds"] = statistics.median(timed(torch_step, batch[0]) for _ in range(args.steps))
        out["batches"][B] = row
        print(f"batch {B:3d}: {len(calls)} guard calls/step x {per_call_s * 1e9:.0f} ns = {cost * 1e6:.1f} us; "
              f"eager step {step_off * 1e3:.2f} ms (guard on {statistics.median(on) * 1e3:.2f} ms): "
              f"{100 * cost / step_off:.3f} % of the step", flush=True)
    worst = max(r["guard_fraction_of_step"] for r in out["batches"].values())
    out["decision"] = "on by default (< 1 % of the eager step)" if worst < 0.01 else "audit mode only (>= 1 %)"
    print(f"worst batch: guard = {100 * worst:.3f} % of an eager decode step -> {out['decision']}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "launch_guard_cost.json").write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
