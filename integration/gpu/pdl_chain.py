"""A whole decode step's layers with programmatic dependent launch (PDL) on and off, on a CUDA GPU (#18, #20).

    python integration/gpu/pdl_chain.py --models llama31-8b,qwen3-0.6b --batches 1,4,16 --out $OUT/pdl.json
    python integration/gpu/pdl_chain.py --cpu-smoke --out /tmp/pdl.json      # logic check, no GPU (no pdl only)

Every decoder layer of a geometry (its own weights, so the step reads them from HBM as a served step does, not from
L2), as vosti's kernels run a decode step: residual-add norm, qkv GEMM, q/k norm (Qwen3, Gemma-3), KV write, paged
attention (split path, grid for --max-model-len), o GEMM, norm(s), gate_up GEMM, activation, down GEMM; rotary
and the lm_head left out. Captured as one CUDA graph and replayed.

Variants (nothing shipped changes):
- no pdl: as vosti launches by default: each kernel after the one before it has ended.
- pdl: programmatic dependent launch (VOSTI_DEPENDENT_LAUNCH=1, vosti_plugin/ops/dependent_launch.py): each kernel
  may start while the one before it runs and waits at its first statement (`griddepcontrol.wait`) until that one
  has ended; the next kernel launches as this one's programs exit.
- pdl early trigger: as pdl, the kernels' sources with `griddepcontrol.launch_dependents` right after the wait: the
  next kernel may launch as soon as every program of this one has started.
Each variant's outputs after one replay from the same inputs are compared bit for bit with the first variant's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
if "--cpu-smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

from vosti_plugin.ops.dependent_launch import ENV  # noqa: E402

WAIT = "        tl.extra.cuda.gdc_wait()\n"
TRIGGER = "        tl.extra.cuda.gdc_launch_dependents()\n"
VARIANTS = ("no pdl", "pdl", "pdl early trigger")


def _set_source(kernel, src: str) -> None:
    """Replace a JITFunction's source; its in-memory compiled kernels (keyed by arguments and options, not by
    source) are dropped so the next launch compiles the new source."""
    kernel._unsafe_update_src(src)
    kernel.hash = None
    kernel.device_caches.clear()


class EarlyTrigger:
    """Inside: every kernel that opens with the dependent-launch wait lets the next kernel launch right after it."""

    def __enter__(self):
        from vosti_plugin.verifier.api import catalog_entries

        self.sources = {}
        for e in catalog_entries():
            k = e["kernel"]
            if id(k) not in self.sources and k.src.count(WAIT) == 1:
                self.sources[id(k)] = (k, k.src)
                _set_source(k, k.src.replace(WAIT, WAIT + TRIGGER))
        return self

    def __exit__(self, *exc):
        for k, src in self.sources.values():
            _set_source(k, src)


def build_step(name: str, batch: int, context: int, max_model_len: int, page_size: int, layers: int | None,
               cpu: bool):
    """(step function, its output tensors, weights bytes) for geometry `name`; the step runs every layer."""
    from vosti_plugin.attention.config import select_config
    from vosti_plugin.attention.kv_write import write_kv
    from vosti_plugin.attention.paged_attention import (num_kv_segments, paged_attention, split_workspace_numel,
                                                        step_max_seq_len)
    from vosti_plugin.integration.geometries import GEOMETRIES
    from vosti_plugin.ops.activation import gelu_tanh_and_mul, silu_and_mul
    from vosti_plugin.ops.matmul import linear
    from vosti_plugin.ops.rmsnorm import fused_add_rms_norm, norm_add_rms_norm, qk_rms_norm

    g = {**GEOMETRIES[name], **GEOMETRIES[name].get("text_config", {})}
    hidden, inter = g["hidden_size"], g["intermediate_size"]
    hq, hkv = g["num_attention_heads"], g["num_key_value_heads"]
    d = g.get("head_dim") or hidden // hq
    n_layers = layers or g["num_hidden_layers"]
    gemma = g["model_type"].startswith("gemma")
    qk_norm = g["model_type"] in ("qwen3", "gemma3_text")
    window = g.get("sliding_window") if gemma else None
    act_fn = gelu_tanh_and_mul if gemma else silu_and_mul
    dt, dev = (torch.float32, "cpu") if cpu else (torch.bfloat16, "cuda")
    gen = torch.Generator(device=dev).manual_seed(0)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, device=dev) * scale).to(dt)

    shapes = {"qkv": ((hq + 2 * hkv) * d, hidden), "o": (hidden, hq * d), "gate_up": (2 * inter, hidden),
              "down": (hidden, inter)}
    weights = [{n: randn(*nk, scale=1 / math.sqrt(nk[1])) for n, nk in shapes.items()} for _ in range(n_layers)]
    gains = [randn(hidden) for _ in range(n_layers)]
    head_gain = randn(d)
    seq_len = context + 1
    per_seq = -(-max_model_len // page_size)
    used = -(-seq_len // page_size)
    caches = [(randn(batch * used, page_size, hkv, d), randn(batch * used, page_size, hkv, d))
              for _ in range(n_layers)]
    block_table = torch.zeros(batch, per_seq, dtype=torch.int32, device=dev)
    block_table[:, :used] = torch.randperm(batch * used, generator=gen, device=dev).to(torch.int32).reshape(batch, used)
    seq_lens = torch.full((batch,), seq_len, dtype=torch.int32, device=dev)
    qsl = torch.arange(batch + 1, dtype=torch.int32, device=dev)
    max_seq_len = step_max_seq_len(seq_lens)
    cfg = select_config(d, hq, hkv, page_size, dt)
    segments = num_kv_segments(block_table, page_size, cfg.segment, max_model_len)
    workspace = torch.empty(split_workspace_numel(batch, hq, d, segments), dtype=torch.float32, device=dev)
    slots = block_table[:, used - 1].long() * page_size + (seq_len - 1) % page_size
    x0, residual0 = randn(batch, hidden), randn(batch, hidden)
    attn_out = torch.empty(batch, hq, d, dtype=dt, device=dev)
    out = {}

    def step():
        x, residual = x0, residual0
        for i in range(n_layers):
            w, gain = weights[i], gains[i]
            if gemma:
                h, residual = norm_add_rms_norm(x, gain, 1e-6, residual, gain, 1e-6, True)
            else:
                h, residual = fused_add_rms_norm(x, residual, gain, 1e-6)
            qkv = linear(h, w["qkv"])
            if qk_norm:
                qk = qkv[:, : (hq + hkv) * d].unflatten(-1, (hq + hkv, d))
                qk_rms_norm(qk, head_gain, head_gain, hq, 1e-6, gemma)
            q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
            k_cache, v_cache = caches[i]
            write_kv(k.unflatten(-1, (hkv, d)), v.unflatten(-1, (hkv, d)), k_cache, v_cache, slots)
            local = window if (window and (i + 1) % 6) else None   # Gemma-3: five window layers, then a global one
            paged_attention(q.unflatten(-1, (hq, d)), k_cache, v_cache, block_table, seq_lens, qsl, attn_out,
                            scale=d ** -0.5, config=cfg, sliding_window=local, max_seqlen_k=max_model_len,
                            workspace=workspace, path="split", max_seq_len=max_seq_len)
            o = linear(attn_out.flatten(1), w["o"])
            if gemma:
                h, residual = norm_add_rms_norm(o, gain, 1e-6, residual, gain, 1e-6, True)
            else:
                h, residual = fused_add_rms_norm(o, residual, gain, 1e-6)
            x = linear(act_fn(linear(h, w["gate_up"])), w["down"])
        out["x"], out["residual"] = x, residual

    weight_bytes = sum(t.numel() * t.element_size() for w in weights for t in w.values())
    return step, out, weight_bytes, n_layers


def _digest(tensors: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(tensors):
        h.update(tensors[k].float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def measure(step, out: dict, repeats: int, cpu: bool) -> tuple[float, str]:
    """(µs per step, digest of the step's outputs after one run): on the GPU one CUDA graph replayed."""
    if cpu:
        t0 = time.perf_counter()
        step()
        return round((time.perf_counter() - t0) * 1e6, 1), _digest(out)
    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    graph.replay()
    torch.cuda.synchronize()
    digest = _digest(out)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / repeats)
    del graph
    return round(sorted(times)[len(times) // 2], 1), digest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama31-8b,qwen3-0.6b,gemma3-4b")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--page-size", type=int, default=64)
    ap.add_argument("--layers", type=int, default=0, help="layers per step (default: the geometry's)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out", default="")
    ap.add_argument("--cpu-smoke", action="store_true", help="a 2-layer step through the interpreter, no pdl only")
    args = ap.parse_args()
    cpu = args.cpu_smoke
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; known: {sorted(VARIANTS)}")
    if cpu:
        args.models, args.batches, args.context, args.max_model_len, args.page_size, args.layers = \
            "qwen3-0.6b", "1", 40, 128, 16, 2
        variants = ["no pdl"]
    elif not torch.cuda.is_available():
        print("FAIL: no CUDA device")
        return 1
    rows = []
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            step, out, weight_bytes, n_layers = build_step(name, batch, args.context, args.max_model_len,
                                                           args.page_size, args.layers, cpu)
            row = {"model": name, "batch": batch, "context": args.context, "layers": n_layers,
                   "weight_GB": round(weight_bytes / 1e9, 2), "us": {}, "digest": {}}
            for v in variants:
                try:
                    os.environ[ENV] = "0" if v == "no pdl" else "1"
                    if v == "pdl early trigger":
                        with EarlyTrigger():
                            row["us"][v], row["digest"][v] = measure(step, out, args.repeats, cpu)
                    else:
                        row["us"][v], row["digest"][v] = measure(step, out, args.repeats, cpu)
                except Exception as e:   # a variant that does not compile or launch: recorded, the others go on
                    row.setdefault("errors", {})[v] = f"{type(e).__name__}: {str(e)[-300:]}"
                finally:
                    os.environ.pop(ENV, None)
            row["bits_equal_no_pdl"] = {v: row["digest"][v] == row["digest"][variants[0]] for v in row["digest"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
            del step, out
            if not cpu:
                torch.cuda.empty_cache()
    report = {"args": vars(args), "device": "cpu" if cpu else torch.cuda.get_device_name(), "rows": rows}
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
