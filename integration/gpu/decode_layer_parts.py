"""One decode step of a served geometry, by part, on a CUDA GPU: where a decode layer's time goes, each part
replayed as a CUDA graph (as vLLM replays a decode step), no vLLM needed.

    python integration/gpu/decode_layer_parts.py --model gemma3-4b --batch 4 --context 1024 --out $OUT/d.json
    python integration/gpu/decode_layer_parts.py --cpu-smoke --out /tmp/d.json   # logic check, no GPU

Parts, µs per replay: the four GEMMs (vosti's `linear` against cuBLAS), attention (split path, its workspace
and segment grid sized for --max-model-len as the backend sizes them; window and global layers; torch SDPA on
dense K/V of the same shape for scale), the KV write, the activation and every norm as vosti's layers call
them: the q and k norms on the heads of the qkv output in place, in one launch (beside two), Gemma's
post-attention and pre-feedforward norms in one launch (beside two; `checks` says whether the bits agree),
Gemma's (1 + w) norms with the weight in its own dtype. `qk_norm_copied` is the q/k norm as it ran before
session 18 (a copy of the split and an fp32 copy of the weight ahead of each launch). Then one whole layer of
each kind as one graph, vosti's GEMMs against cuBLAS's, and the step it adds up to.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if "--cpu-smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

from prefill_layer_parts import EXTRAS, GEOMETRIES, _time  # noqa: E402


def _replay_us(fn, repeats: int, cpu: bool) -> float:
    """Mean µs per call: on the GPU, fn captured once as a CUDA graph and replayed; on the interpreter,
    the call itself."""
    if cpu:
        return round(_time(fn, repeats, "cpu")["gpu"] * 1e3, 2)
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return round(_time(graph.replay, repeats)["gpu"] * 1e3, 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(GEOMETRIES), default="gemma3-4b")
    ap.add_argument("--batch", type=int, default=4, help="sequences decoding one token each")
    ap.add_argument("--context", type=int, default=1024, help="cached tokens of each sequence")
    ap.add_argument("--max-model-len", type=int, default=32768, help="sizes the split grid and workspace")
    ap.add_argument("--page-size", type=int, default=64, help="vosti's deployed page (block) size")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--out", default="")
    ap.add_argument("--cpu-smoke", action="store_true", help="a tiny geometry through the interpreter in fp32")
    args = ap.parse_args()
    cpu = args.cpu_smoke
    if cpu:
        args.model, args.batch, args.context, args.max_model_len, args.page_size, args.repeats = \
            "smoke", 2, 40, 128, 16, 1
    elif not torch.cuda.is_available():
        print("FAIL: no CUDA device")
        return 1
    from vosti_plugin.attention.config import select_config
    from vosti_plugin.attention.kv_write import write_kv
    from vosti_plugin.attention.paged_attention import (num_kv_segments, paged_attention, split_workspace_numel,
                                                        step_max_seq_len)
    from vosti_plugin.ops.activation import gelu_tanh_and_mul, silu_and_mul
    from vosti_plugin.ops.matmul import linear
    from vosti_plugin.ops.rmsnorm import fused_add_rms_norm, norm_add_rms_norm, qk_rms_norm, rms_norm

    hidden, inter, hq, hkv, d, layers, window = GEOMETRIES[args.model]
    norms, act = EXTRAS[args.model]
    gemma = "sandwich" in norms
    dt, dev = (torch.float32, "cpu") if cpu else (torch.bfloat16, "cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    B = args.batch

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, device=dev) * scale).to(dt)

    shapes = {"qkv": ((hq + 2 * hkv) * d, hidden), "o": (hidden, hq * d), "gate_up": (2 * inter, hidden),
              "down": (hidden, inter)}
    weights = {n: randn(nk[0], nk[1], scale=1 / math.sqrt(nk[1])) for n, nk in shapes.items()}
    inputs = {n: randn(B, nk[1]) for n, nk in shapes.items()}
    parts: dict = {}
    for name in shapes:
        x, w = inputs[name], weights[name]
        parts[f"gemm_{name}"] = {"vosti": _replay_us(lambda: linear(x, w), args.repeats, cpu),
                                 "cublas": _replay_us(lambda: torch.nn.functional.linear(x, w), args.repeats, cpu)}

    seq_len = args.context + 1
    per_seq = -(-args.max_model_len // args.page_size)
    used = -(-seq_len // args.page_size)
    k_cache, v_cache = randn(B * used, args.page_size, hkv, d), randn(B * used, args.page_size, hkv, d)
    block_table = torch.zeros(B, per_seq, dtype=torch.int32, device=dev)
    block_table[:, :used] = torch.randperm(B * used, generator=gen, device=dev).to(torch.int32).reshape(B, used)
    seq_lens = torch.full((B,), seq_len, dtype=torch.int32, device=dev)
    qsl = torch.arange(B + 1, dtype=torch.int32, device=dev)
    max_seq_len = step_max_seq_len(seq_lens)
    cfg = select_config(d, hq, hkv, args.page_size, dt)
    segments = num_kv_segments(block_table, args.page_size, cfg.segment, args.max_model_len)
    workspace = torch.empty(split_workspace_numel(B, hq, d, segments), dtype=torch.float32, device=dev)
    q, out = randn(B, hq, d), torch.empty(B, hq, d, dtype=dt, device=dev)
    kinds = {"global": None} if window is None else {"window": window[0], "global": None}

    def attend(w):
        paged_attention(q, k_cache, v_cache, block_table, seq_lens, qsl, out, scale=d ** -0.5, config=cfg,
                        sliding_window=w, max_seqlen_k=args.max_model_len, workspace=workspace, path="split",
                        max_seq_len=max_seq_len)

    for kind, w in kinds.items():
        parts[f"attention_{kind}"] = _replay_us(lambda w=w: attend(w), args.repeats, cpu)
    # for scale, what a dense-KV attention costs (torch SDPA, its fastest backend, no pages): the window layer
    # reads only its window, as FlashAttention does
    for kind, w in kinds.items():
        keys = min(seq_len, w) if w else seq_len
        qd, kd, vd = randn(B, hq, 1, d), randn(B, hkv, keys, d), randn(B, hkv, keys, d)
        parts[f"attention_{kind}_sdpa_dense"] = _replay_us(
            lambda qd=qd, kd=kd, vd=vd: torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, enable_gqa=True),
            args.repeats, cpu)

    x, residual, gain, head_gain = randn(B, hidden), randn(B, hidden), randn(hidden), randn(d)
    checks: dict = {}
    qkv_out = randn(B, shapes["qkv"][0])
    q_view, k_view, _v = qkv_out.split([hq * d, hkv * d, hkv * d], dim=-1)
    q_heads, k_heads = q_view.unflatten(-1, (hq, d)), k_view.unflatten(-1, (hkv, d))
    qk_heads = qkv_out[:, : (hq + hkv) * d].unflatten(-1, (hq + hkv, d))
    k_gain = randn(d)
    kv_new = randn(B, hkv, d)
    slots = block_table[:, used - 1].long() * args.page_size + (seq_len - 1) % args.page_size
    gate_up = randn(B, 2 * inter)
    act_fn = gelu_tanh_and_mul if act == "gelu_tanh" else silu_and_mul
    parts["input_norm"] = _replay_us(lambda: fused_add_rms_norm(x, residual, gain, 1e-6, gemma), args.repeats, cpu)
    if "qk_norm" in norms:
        parts["qk_norm"] = _replay_us(lambda: (rms_norm(q_heads, head_gain, 1e-6, gemma),
                                               rms_norm(k_heads, head_gain, 1e-6, gemma)), args.repeats, cpu)
        parts["qk_norm_one_launch"] = _replay_us(lambda: qk_rms_norm(qk_heads, head_gain, k_gain, hq, 1e-6, gemma),
                                                 args.repeats, cpu)
        one = qk_rms_norm(qk_heads, head_gain, k_gain, hq, 1e-6, gemma)
        checks["qk_norm_bits_equal_two_launches"] = bool(
            torch.equal(one[:, :hq], rms_norm(q_heads, head_gain, 1e-6, gemma))
            and torch.equal(one[:, hq:], rms_norm(k_heads, k_gain, 1e-6, gemma)))
        parts["qk_norm_copied"] = _replay_us(
            lambda: (rms_norm(q_heads.contiguous(), head_gain.float(), 1e-6, gemma),
                     rms_norm(k_heads.contiguous(), head_gain.float(), 1e-6, gemma)), args.repeats, cpu)
    if gemma:
        parts["post_norm"] = _replay_us(lambda: rms_norm(x, gain, 1e-6, True), args.repeats, cpu)
        parts["post_norm_fp32_weight"] = _replay_us(lambda: rms_norm(x, gain.float(), 1e-6, True), args.repeats, cpu)
        parts["norm_pair_one_launch"] = _replay_us(lambda: norm_add_rms_norm(x, gain, 1e-6, residual, gain, 1e-6, True),
                                                   args.repeats, cpu)
        parts["norm_pair_two_launches"] = _replay_us(
            lambda: fused_add_rms_norm(rms_norm(x, gain, 1e-6, True), residual, gain, 1e-6, True), args.repeats, cpu)
        one = norm_add_rms_norm(x, gain, 1e-6, residual, head_gain.new_ones(hidden), 1e-6, True)
        two = fused_add_rms_norm(rms_norm(x, gain, 1e-6, True), residual, head_gain.new_ones(hidden), 1e-6, True)
        checks["norm_pair_bits_equal_two_launches"] = all(torch.equal(a, b) for a, b in zip(one, two))
    parts["kv_write"] = _replay_us(lambda: write_kv(kv_new, kv_new, k_cache, v_cache, slots), args.repeats, cpu)
    parts["activation"] = _replay_us(lambda: act_fn(gate_up), args.repeats, cpu)

    def layer(kind, gemm):
        """One decoder layer's ops in vLLM's order (rotary left out). Gemma: its input norm runs in one launch
        with the previous layer's post-feedforward norm, as vosti's Gemma model forward runs them."""
        if gemma:
            norm_add_rms_norm(x, gain, 1e-6, residual, gain, 1e-6, True)
        else:
            fused_add_rms_norm(x, residual, gain, 1e-6, gemma)
        gemm(inputs["qkv"], weights["qkv"])
        if "qk_norm" in norms:
            qk_rms_norm(qk_heads, head_gain, k_gain, hq, 1e-6, gemma)
        write_kv(kv_new, kv_new, k_cache, v_cache, slots)
        attend(kinds[kind])
        gemm(inputs["o"], weights["o"])
        if gemma:   # the post-attention norm and the pre-feedforward residual-add norm in one launch
            norm_add_rms_norm(x, gain, 1e-6, residual, gain, 1e-6, True)
        else:
            fused_add_rms_norm(x, residual, gain, 1e-6, gemma)
        gemm(inputs["gate_up"], weights["gate_up"])
        act_fn(gate_up)
        gemm(inputs["down"], weights["down"])

    window_layers = window[1] if window else 0
    counts = {"window": window_layers, "global": layers - window_layers} if window else {"global": layers}
    whole = {kind: {"vosti": _replay_us(lambda kind=kind: layer(kind, linear), args.repeats, cpu),
                    "cublas_gemms": _replay_us(lambda kind=kind: layer(kind, torch.nn.functional.linear),
                                               args.repeats, cpu)} for kind in counts}
    step = {mode: round(sum(whole[k][mode] * n for k, n in counts.items()), 1) for mode in ("vosti", "cublas_gemms")}
    summary = {"model": args.model, "batch": B, "context": args.context, "max_model_len": args.max_model_len,
               "page_size": args.page_size, "layers": counts,
               "config": {"block_m": cfg.block_m, "block_n": cfg.block_n, "segment": cfg.segment,
                          "num_warps": cfg.num_warps, "segments": segments},
               "parts_us": parts, "layer_us": whole, "step_us": step, "checks": checks}
    print(json.dumps(summary, indent=1))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
