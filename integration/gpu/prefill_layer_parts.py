"""One prefill step of a served geometry, by part, on a CUDA GPU: each decoder layer's four GEMMs (vosti's
`linear` against cuBLAS) and its attention (vosti's `paged_attention`, split and fused path) for a chunk of
`--tokens` query tokens over a cached prefix of `--context` tokens.

    python integration/gpu/prefill_layer_parts.py --model gemma3-4b --context 8192 --out $OUT/parts.json
    python integration/gpu/prefill_layer_parts.py --cpu-smoke --out /tmp/parts.json   # logic check, no GPU

Per part, after a warm-up: `gpu`, the CUDA-event mean over back-to-back calls, and `host`, the time the calls
took to enqueue. Then a whole step's GEMMs and attention (every layer, Gemma-3's window and global layers)
back to back, as an eager engine step launches them, first alone and then with every other vosti op of each
layer (norms, q/k norms, KV write, activation; rotary and the sampler left out): host time above GPU time
means the step is launch-bound. Set it beside a step of the throughput bench.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
if "--cpu-smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

# hidden, intermediate, q heads, kv heads, head_dim, layers, (window, window layers) or None
GEOMETRIES = {
    "llama31-8b": (4096, 14336, 32, 8, 128, 32, None),
    "gemma3-4b": (2560, 10240, 8, 4, 256, 34, (1024, 29)),
    "qwen3-8b": (4096, 12288, 32, 8, 128, 36, None),
    "smoke": (64, 96, 4, 2, 32, 2, (16, 1)),  # --cpu-smoke: the interpreter in fp32
}
# per-layer ops besides the GEMMs and attention: q/k norms (Qwen3, Gemma-3), Gemma's post-attention and
# post-feedforward norms, and the gated activation
EXTRAS = {"llama31-8b": ((), "silu"), "qwen3-8b": (("qk_norm",), "silu"),
          "gemma3-4b": (("qk_norm", "sandwich"), "gelu_tanh"), "smoke": (("qk_norm", "sandwich"), "gelu_tanh")}


def _time(fn, repeats: int, device: str = "cuda") -> dict:
    """Mean ms per call: `gpu` from CUDA events around back-to-back calls, `host` the time the calls took
    to enqueue (a part whose host time is above its GPU time is launch-bound in an eager engine step)."""
    fn()
    if device == "cpu":  # the interpreter runs each launch to completion: host and device time are one
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        ms = round((time.perf_counter() - t0) * 1e3 / repeats, 4)
        return {"gpu": ms, "host": ms}
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    host = time.perf_counter() - t0
    end.record()
    torch.cuda.synchronize()
    return {"gpu": round(start.elapsed_time(end) / repeats, 4), "host": round(host * 1e3 / repeats, 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(GEOMETRIES), default="gemma3-4b")
    ap.add_argument("--context", type=int, default=8192, help="cached tokens before the chunk")
    ap.add_argument("--tokens", type=int, default=2048, help="query tokens in the step (one sequence)")
    ap.add_argument("--page-size", type=int, default=64, help="vosti's deployed page (block) size")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default="")
    ap.add_argument("--cpu-smoke", action="store_true", help="a tiny geometry through the interpreter in fp32")
    args = ap.parse_args()
    if args.cpu_smoke:
        args.model, args.context, args.tokens, args.page_size, args.repeats = "smoke", 40, 24, 16, 1
    elif not torch.cuda.is_available():
        print("FAIL: no CUDA device")
        return 1
    from vosti_plugin.attention.config import prefill_config, select_config
    from vosti_plugin.attention.paged_attention import paged_attention
    from vosti_plugin.attention.kv_write import write_kv
    from vosti_plugin.ops.activation import gelu_tanh_and_mul, silu_and_mul
    from vosti_plugin.ops.matmul import linear
    from vosti_plugin.ops.rmsnorm import fused_add_rms_norm, norm_add_rms_norm, qk_rms_norm, rms_norm

    hidden, inter, hq, hkv, d, layers, window = GEOMETRIES[args.model]
    dt, dev = (torch.float32, "cpu") if args.cpu_smoke else (torch.bfloat16, "cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    shapes = {"qkv": ((hq + 2 * hkv) * d, hidden), "o": (hidden, hq * d), "gate_up": (2 * inter, hidden),
              "down": (hidden, inter)}
    weights = {n: (torch.randn(nk[0], nk[1], generator=gen, device=dev) / math.sqrt(nk[1])).to(dt)
               for n, nk in shapes.items()}
    inputs = {n: torch.randn(args.tokens, nk[1], generator=gen, device=dev).to(dt) for n, nk in shapes.items()}
    gemms = {}
    for name, (n, k) in shapes.items():
        x, w = inputs[name], weights[name]
        gemms[name] = {"vosti": _time(lambda: linear(x, w), args.repeats, dev),
                       "cublas": _time(lambda: torch.nn.functional.linear(x, w), args.repeats, dev)}
        print(f"{name:8s} {n}x{k} M={args.tokens}: vosti {gemms[name]['vosti']}, cuBLAS {gemms[name]['cublas']} ms",
              flush=True)

    seq_len = args.context + args.tokens
    pages = -(-seq_len // args.page_size)
    k_cache = torch.randn(pages, args.page_size, hkv, d, generator=gen, device=dev).to(dt)
    v_cache = torch.randn(pages, args.page_size, hkv, d, generator=gen, device=dev).to(dt)
    block_table = torch.randperm(pages, generator=gen, device=dev).to(torch.int32).reshape(1, pages)
    seq_lens = torch.tensor([seq_len], dtype=torch.int32, device=dev)
    qsl = torch.tensor([0, args.tokens], dtype=torch.int32, device=dev)
    q = torch.randn(args.tokens, hq, d, generator=gen, device=dev).to(dt)
    out = torch.empty_like(q)
    cfg = select_config(d, hq, hkv, args.page_size, dt)
    kinds = {"global": None} if window is None else {"window": window[0], "global": None}

    fused_cfg = prefill_config(cfg, d, args.page_size)   # what a deployment's prefill steps launch

    def attend(w, path):
        paged_attention(q, k_cache, v_cache, block_table, seq_lens, qsl, out, scale=d ** -0.5,
                        config=fused_cfg if path == "fused" else cfg, sliding_window=w, max_seqlen_k=seq_len,
                        path=path)

    attention = {}
    for kind, w in kinds.items():
        for path in ("split", "fused"):
            attention[f"{kind}_{path}"] = _time(lambda: attend(w, path), args.repeats, dev)
            print(f"attention {kind} {path}: {attention[f'{kind}_{path}']} ms", flush=True)

    window_layers = window[1] if window else 0
    layer_kinds = ["window"] * window_layers + ["global"] * (layers - window_layers)

    def step(gemm, other_ops=None):
        for kind in layer_kinds:
            if other_ops is not None:
                other_ops()
            for name in shapes:
                gemm(inputs[name], weights[name])
            attend(kinds[kind], "fused")  # a prefill chunk's path in a deployment

    norms, act = EXTRAS[args.model]
    x = torch.randn(args.tokens, hidden, generator=gen, device=dev).to(dt)
    residual = torch.randn(args.tokens, hidden, generator=gen, device=dev).to(dt)
    gain = torch.randn(hidden, generator=gen, device=dev).to(dt)
    head_gain = torch.randn(d, generator=gen, device=dev).to(dt)
    gate_up = torch.randn(args.tokens, 2 * inter, generator=gen, device=dev).to(dt)
    kv_new = torch.randn(args.tokens, hkv, d, generator=gen, device=dev).to(dt)
    positions = torch.arange(args.context, seq_len, device=dev)
    slots = (block_table[0, positions // args.page_size].long() * args.page_size + positions % args.page_size)
    # q/k norms read the q and k heads of the qkv output in place, as vosti's attention forward hands them over
    qkv_out = torch.randn(args.tokens, (hq + 2 * hkv) * d, generator=gen, device=dev).to(dt)
    qk_rows = qkv_out[:, : (hq + hkv) * d].unflatten(-1, (hq + hkv, d))
    gemma = "sandwich" in norms
    act_fn = gelu_tanh_and_mul if act == "gelu_tanh" else silu_and_mul

    def layer_ops():
        """One layer's other vosti ops, as vLLM's decoder layer calls them."""
        fused_add_rms_norm(x, residual, gain, 1e-6, gemma)        # input norm
        if "qk_norm" in norms:   # both in one launch
            qk_rms_norm(qk_rows, head_gain, head_gain, hq, 1e-6, gemma)
        write_kv(kv_new, kv_new, k_cache, v_cache, slots)
        if gemma:   # post-attention norm + pre-feedforward residual-add norm, one launch
            norm_add_rms_norm(x, gain, 1e-6, residual, gain, 1e-6, True)
        else:
            fused_add_rms_norm(x, residual, gain, 1e-6, gemma)    # pre-feedforward norm
        act_fn(gate_up)
        if gemma:
            rms_norm(x, gain, 1e-6, True)                       # post-feedforward norm

    other = _time(layer_ops, args.repeats, dev)
    print(f"other ops of a layer (norms, KV write, activation): {other} ms", flush=True)

    # a step's launches back to back, as an eager engine step makes them
    sequence = {"vosti": _time(lambda: step(linear), 2, dev), "cublas_gemms": _time(lambda: step(torch.nn.functional.linear), 2, dev),
                "vosti_all_ops": _time(lambda: step(linear, layer_ops), 2, dev)}
    print(f"step of {layers} layers (GEMMs + attention): vosti {sequence['vosti']}, with cuBLAS GEMMs "
          f"{sequence['cublas_gemms']} ms; every vosti op of the layers {sequence['vosti_all_ops']} ms", flush=True)
    summary = {"model": args.model, "context": args.context, "tokens": args.tokens, "page_size": args.page_size,
               "tma_gemm": os.environ.get("VOSTI_TMA_GEMM", "") != "0",
               "config": {"block_m": cfg.block_m, "block_n": cfg.block_n, "segment": cfg.segment,
                          "num_warps": cfg.num_warps},
               "per_layer_ms": {"gemm": gemms, "attention": attention, "other_ops": other}, "step_ms": sequence,
               "step_tok_s": {k: round(args.tokens / (max(v["gpu"], v["host"]) / 1e3)) for k, v in sequence.items()}}
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
