"""Throughput of one vLLM mode vs cached context, prefill and decode separately (run one process per mode).

  python -m vosti_plugin.integration.bench.throughput --mode vosti|vosti-sync|vosti-async|default|bi [--backend TRITON_ATTN] \
      --model llama31-8b --contexts 0,1024,4096,8192,16384 --batches 1,4,16 --out result.json

Per (batch, context): fresh random prompts are prefilled once (max_tokens=1; prefill tok/s = batch * context /
that time); then the same prompts run again with max_tokens = decode_tokens + 1. Prefix caching is on, so the
second run finds the context cached (checked: `decode_method` is "cached" when every request hit at least
context - page tokens) and its time is the decode time at that cached context plus one step for the
uncached tail: decode tok/s = batch * decode_tokens / that time. Where the cache did not hit (a mode
without prefix caching), the decode time falls back to (fresh prefill + decode) - prefill alone, marked
"subtracted"; that difference of two long times is noisy when prefill dominates. Each cell is measured
--repeats times (default 3) on fresh prompts and reports the median times, every sample kept in the row: a
first launch's compile (a Triton kernel specialised for a step shape the warm-up did not have) or a noisy run
in one sample does not set the cell.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from vosti_plugin.integration.bench.modes import MODES, attention_impl_names, engine_kwargs, prepare_environment

HBM_BYTES_PER_S = 4.3e12


def weight_bytes(cfg: dict, bytes_per_elem: int = 2) -> int:
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = cfg.get("head_dim", h // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * inter
    lm = v * h * (1 if cfg.get("tie_word_embeddings") else 2)
    return (cfg["num_hidden_layers"] * per_layer + lm) * bytes_per_elem


def kv_bytes_per_token(cfg: dict, bytes_per_elem: int = 2) -> int:
    """K + V bytes of one token over all layers."""
    hd = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * hd * bytes_per_elem


def kv_bytes_read(cfg: dict, context: int, bytes_per_elem: int = 2) -> int:
    """K + V bytes one decode step reads for one sequence: a sliding-window layer reads its window only."""
    per_layer = kv_bytes_per_token(cfg, bytes_per_elem) // cfg["num_hidden_layers"]
    window = cfg.get("sliding_window")
    kinds = cfg.get("layer_types") or ["full_attention"] * cfg["num_hidden_layers"]
    return sum(per_layer * (min(context, window) if window and kind == "sliding_attention" else context)
               for kind in kinds)


def decode_floor_tok_s(cfg: dict, batch: int, context: int, bytes_per_elem: int = 2) -> float:
    """Tokens/s if each decode step only had to read the weights once and every sequence's KV once."""
    step_bytes = weight_bytes(cfg, bytes_per_elem) + batch * kv_bytes_read(cfg, context, bytes_per_elem)
    return batch * HBM_BYTES_PER_S / step_bytes


def resolve_model(model: str) -> tuple[Path, dict, str]:
    """(directory vLLM loads, text geometry, load_format) of a registry name (llama31-8b, gemma3-4b, qwen3-8b:
    config only, dummy weights; tiny: the bundled model with its weights) or of a model directory (its weights)."""
    path = Path(model)
    if path.is_dir():
        config_file = path / "config.json"
        if not config_file.is_file():
            raise ValueError(f"{model} is a directory without a config.json")
        config = json.loads(config_file.read_text())
        return path, config.get("text_config", config), "auto"
    from vosti_plugin.integration.harness.models import get, materialize

    spec = get(model)
    if spec.config is None:
        from vosti_plugin.integration.tiny_model import GEOMETRY

        return materialize(spec), GEOMETRY, "auto"
    return materialize(spec), spec.config.get("text_config", spec.config), "dummy"


def compile_cache_entries() -> dict[str, int]:
    """Entries in the Triton kernel cache and vLLM's torch.compile cache: all 0 means this run compiles from
    scratch (a cold start)."""
    import os

    triton_dir = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
    vllm_dir = Path(os.environ.get("VLLM_CACHE_ROOT") or Path.home() / ".cache" / "vllm") / "torch_compile_cache"
    return {name: sum(1 for _ in d.iterdir()) if d.is_dir() else 0
            for name, d in (("triton", triton_dir), ("vllm_torch_compile", vllm_dir))}


def max_num_seqs(batches: list[int]) -> int:
    """Every sequence of the largest batch decodes in the same step (64 up to batch 64, as in earlier runs)."""
    return max(64, *batches)


def cell_row(batch: int, ctx: int, samples: list[tuple[float, float, str, int]], decode_tokens: int,
             floor_tok_s: float) -> dict:
    """One grid cell from its repeated measurements (prefill s, decode s, decode method, cached tokens): the
    median times (a first-launch compile or a noisy run in one sample does not set the number), every sample
    kept beside them."""
    prefill_s = statistics.median(s[0] for s in samples)
    decode_s = statistics.median(s[1] for s in samples)
    methods = sorted({s[2] for s in samples})
    return {"batch": batch, "context": ctx, "prefill_s": prefill_s, "decode_s": decode_s,
            "decode_method": methods[0] if len(methods) == 1 else "+".join(methods),
            "min_cached_tokens": min(s[3] for s in samples),
            "prefill_tok_s": batch * max(ctx, 1) / prefill_s,
            "decode_tok_s": batch * decode_tokens / decode_s,
            "decode_floor_tok_s": floor_tok_s, "repeats": len(samples),
            "prefill_s_samples": [s[0] for s in samples], "decode_s_samples": [s[1] for s in samples]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--backend", default=None, help="stock attention backend (e.g. FLASH_ATTN, TRITON_ATTN)")
    ap.add_argument("--model", default="llama31-8b", help="llama31-8b, gemma3-4b, qwen3-8b, tiny or a model directory")
    ap.add_argument("--contexts", default="0,1024,4096,8192,16384")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--max-model-len", type=int, default=20000)
    ap.add_argument("--max-num-batched-tokens", type=int, default=None,
                    help="tokens per engine step (default: the engine's, which vosti sets to 2048)")
    ap.add_argument("--max-cudagraph-capture-size", type=int, default=None,
                    help="largest step replayed as a (piecewise) CUDA graph; at 2048, vosti's prefill steps are "
                         "graphs too, with attention run eagerly between the pieces (default: the engine's)")
    ap.add_argument("--eager", action="store_true", help="no CUDA graphs / torch.compile")
    ap.add_argument("--dtype", default="bfloat16", help="float32 for a CPU smoke run (vosti on CPU is fp32)")
    ap.add_argument("--warmup-prefill", type=int, default=2048, help="prompt tokens of the warm-up prefill")
    ap.add_argument("--repeats", type=int, default=3,
                    help="times each cell is measured on fresh prompts; the row keeps the medians and every sample")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {a.repeats}")
    prepare_environment(a.mode)
    model_dir, geometry, load_format = resolve_model(a.model)
    from vllm import LLM, SamplingParams

    batches = [int(x) for x in a.batches.split(",")]
    kw = dict(model=str(model_dir), load_format=load_format, skip_tokenizer_init=True, dtype=a.dtype,
              max_model_len=a.max_model_len, gpu_memory_utilization=0.85, enable_prefix_caching=True,
              seed=0, max_num_seqs=max_num_seqs(batches), enforce_eager=a.eager)
    if a.max_num_batched_tokens is not None:
        kw["max_num_batched_tokens"] = a.max_num_batched_tokens
    if a.max_cudagraph_capture_size is not None:
        kw["compilation_config"] = {"max_cudagraph_capture_size": a.max_cudagraph_capture_size}
    kw.update(engine_kwargs(a.mode, a.backend))
    caches = compile_cache_entries()
    t0 = time.perf_counter()
    llm = LLM(**kw)
    res = {"mode": a.mode, "backend": a.backend, "model": a.model, "startup_s": time.perf_counter() - t0,
           "compile_caches_at_start": caches, "eager": a.eager, "rows": []}
    if a.max_cudagraph_capture_size is not None:
        res["max_cudagraph_capture_size"] = a.max_cudagraph_capture_size
    page_size = llm.llm_engine.vllm_config.cache_config.block_size
    bytes_per_elem = 4 if a.dtype == "float32" else 2
    res["attention_impls"] = sorted(set(sum(llm.apply_model(attention_impl_names), [])))
    print(f"[{a.mode}] startup {res['startup_s']:.1f}s attention impls {res['attention_impls']}", flush=True)
    rng = random.Random(0)
    vocab = min(geometry["vocab_size"], 100000)

    def prompts(n, length):
        return [{"prompt_token_ids": [rng.randrange(10, vocab) for _ in range(max(length, 1))]} for _ in range(n)]

    one = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    many = SamplingParams(temperature=0.0, max_tokens=a.decode_tokens + 1, ignore_eos=True)
    llm.generate(prompts(2, 64), many, use_tqdm=False)  # warm-up: decode and short prefill
    # and one tall prefill, so kernels first launched at many rows (JIT, first-use costs) are not timed below
    llm.generate(prompts(1, min(a.warmup_prefill, a.max_model_len - 2)), one, use_tqdm=False)
    def measure(batch, ctx):
        """(prefill s, decode s, decode method, cached tokens) of one cell on fresh prompts."""
        ps = prompts(batch, ctx)
        t = time.perf_counter(); llm.generate(ps, one, use_tqdm=False); t_pre = time.perf_counter() - t
        t = time.perf_counter(); outs = llm.generate(ps, many, use_tqdm=False); t_dec = time.perf_counter() - t
        cached = min(o.num_cached_tokens or 0 for o in outs)
        if cached >= ctx - page_size:
            return t_pre, t_dec, "cached", cached
        ps = prompts(batch, ctx)
        t = time.perf_counter(); llm.generate(ps, many, use_tqdm=False); t_all = time.perf_counter() - t
        return t_pre, max(t_all - t_pre, 1e-9), "subtracted", cached

    for batch in batches:
        for ctx in [int(x) for x in a.contexts.split(",")]:
            if ctx + a.decode_tokens + 2 > a.max_model_len:
                continue
            samples = [measure(batch, ctx) for _ in range(a.repeats)]
            row = cell_row(batch, ctx, samples, a.decode_tokens, decode_floor_tok_s(geometry, batch, ctx, bytes_per_elem))
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
