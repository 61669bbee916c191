"""Cost of the `host-numerics` startup self-test for a deployment geometry (no vLLM needed).

    python3 integration/gpu/host_numerics_cost.py --models llama31-8b,gemma3-4b --out DIR

Per model: the first run in the process (Triton compiles what is not in its disk cache), a second run
with the per-process cache cleared (launches only: what a restart with a warm Triton cache pays), and
the cached call (what every further check in the process pays). On CPU it runs the tiny model.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from vosti_plugin.integration.harness import models
from vosti_plugin.launch import host_numerics
from vosti_plugin.launch.facts import LaunchFacts


def facts_for(config: dict, platform: str, dtype: str, page_size: int = 64) -> LaunchFacts:
    heads = config["num_attention_heads"]
    return LaunchFacts(
        model=config.get("model_type", "model"), architecture=",".join(config["architectures"]), dtype=dtype,
        head_size=config.get("head_dim") or config["hidden_size"] // heads, num_q_heads=heads,
        num_kv_heads=config["num_key_value_heads"], num_layers=config["num_hidden_layers"],
        hidden_size=config["hidden_size"], intermediate_size=config["intermediate_size"],
        vocab_size=config["vocab_size"], sliding_window=config.get("sliding_window"), page_size=page_size,
        max_model_len=16384, max_num_batched_tokens=2048, max_num_seqs=256, num_gpu_blocks=None,
        platform=platform)


def measure(name: str, facts: LaunchFacts) -> dict:
    host_numerics.clear_cache()
    t0 = time.perf_counter()
    first = host_numerics.run_self_test(facts)
    first_s = time.perf_counter() - t0
    host_numerics.clear_cache()
    t0 = time.perf_counter()
    warm = host_numerics.run_self_test(facts)
    warm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    host_numerics.run_self_test(facts)
    cached_s = time.perf_counter() - t0
    row = {"model": name, "device": first.device, "dtype": facts.dtype, "probes": len(first.probes),
           "passed": first.ok and warm.ok, "first_s": round(first_s, 3), "warm_s": round(warm_s, 4),
           "cached_s": round(cached_s, 6), "failed": {**first.to_dict()["failed"], **warm.to_dict()["failed"]}}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="llama31-8b,gemma3-4b,qwen3-8b")
    ap.add_argument("--out", default="gpu-out/host_numerics")
    args = ap.parse_args()
    rows = []
    if torch.cuda.is_available():
        for name in args.models.split(","):
            rows.append(measure(name, facts_for(models.get(name).config, "cuda", "bfloat16")))
    else:
        from vosti_plugin.integration.tiny_model import GEOMETRY
        from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

        ensure_interpreter_without_gpu()
        rows.append(measure("tiny", facts_for(GEOMETRY, "cpu", "float32")))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "host_numerics.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
