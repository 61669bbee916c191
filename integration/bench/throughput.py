"""Throughput of one vLLM mode vs cached context, prefill and decode separately (run one process per mode).

  python -m integration.bench.throughput --mode vosti|vosti-sync|vosti-async|default|bi [--backend TRITON_ATTN] \
      --model llama31-8b --contexts 0,1024,4096,8192,16384 --batches 1,4,16 --out result.json

Decode tok/s = batch * decode_tokens / (time of prefill + decode - time of prefill alone); prefill tok/s =
batch * context / prefill time. Prompts are random token ids; prefix caching is off so every run computes.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from integration.bench.modes import MODES, engine_kwargs, prepare_environment

HBM_BYTES_PER_S = 4.3e12


def weight_bytes(cfg: dict, bytes_per_elem: int = 2) -> int:
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = cfg.get("head_dim", h // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * inter
    lm = v * h * (1 if cfg.get("tie_word_embeddings") else 2)
    return (cfg["num_hidden_layers"] * per_layer + lm) * bytes_per_elem


def kv_bytes_per_token(cfg: dict, bytes_per_elem: int = 2) -> int:
    hd = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * hd * bytes_per_elem


def decode_floor_tok_s(cfg: dict, batch: int, context: int) -> float:
    """Tokens/s if each decode step only had to read the weights once and every sequence's KV once."""
    step_bytes = weight_bytes(cfg) + batch * context * kv_bytes_per_token(cfg)
    return batch * HBM_BYTES_PER_S / step_bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--backend", default=None, help="stock attention backend (e.g. FLASH_ATTN, TRITON_ATTN)")
    ap.add_argument("--model", default="llama31-8b")
    ap.add_argument("--contexts", default="0,1024,4096,8192,16384")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--max-model-len", type=int, default=20000)
    ap.add_argument("--eager", action="store_true", help="no CUDA graphs / torch.compile")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    prepare_environment(a.mode)
    from integration.harness.models import get, materialize

    spec = get(a.model)
    model_dir = materialize(spec)
    from vllm import LLM, SamplingParams

    kw = dict(model=str(model_dir), load_format="dummy", skip_tokenizer_init=True, dtype="bfloat16",
              max_model_len=a.max_model_len, gpu_memory_utilization=0.85, enable_prefix_caching=False,
              seed=0, max_num_seqs=64, enforce_eager=a.eager)
    kw.update(engine_kwargs(a.mode, a.backend))
    t0 = time.perf_counter()
    llm = LLM(**kw)
    res = {"mode": a.mode, "backend": a.backend, "model": a.model, "startup_s": time.perf_counter() - t0,
           "eager": a.eager, "rows": []}
    res["attention_impls"] = sorted(set(sum(llm.apply_model(
        lambda m: sorted({type(x.impl).__name__ for x in m.modules() if hasattr(x, "impl")})), [])))
    print(f"[{a.mode}] startup {res['startup_s']:.1f}s attention impls {res['attention_impls']}", flush=True)
    rng = random.Random(0)
    vocab = min(spec.vocab_size, 100000)

    def prompts(n, length):
        return [{"prompt_token_ids": [rng.randrange(10, vocab) for _ in range(max(length, 1))]} for _ in range(n)]

    one = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    many = SamplingParams(temperature=0.0, max_tokens=a.decode_tokens + 1, ignore_eos=True)
    llm.generate(prompts(2, 64), many, use_tqdm=False)  # warm-up
    for batch in [int(x) for x in a.batches.split(",")]:
        for ctx in [int(x) for x in a.contexts.split(",")]:
            if ctx + a.decode_tokens + 2 > a.max_model_len:
                continue
            ps = prompts(batch, ctx)
            t = time.perf_counter(); llm.generate(ps, one, use_tqdm=False); t_pre = time.perf_counter() - t
            ps = prompts(batch, ctx)
            t = time.perf_counter(); llm.generate(ps, many, use_tqdm=False); t_all = time.perf_counter() - t
            row = {"batch": batch, "context": ctx, "prefill_s": t_pre, "total_s": t_all,
                   "prefill_tok_s": batch * max(ctx, 1) / t_pre,
                   "decode_tok_s": batch * a.decode_tokens / max(t_all - t_pre, 1e-9),
                   "decode_floor_tok_s": decode_floor_tok_s(spec.config, batch, ctx)}
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
