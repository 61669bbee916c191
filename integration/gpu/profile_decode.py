"""Where a decode (or prefill) step's time goes, per mode: GPU kernel time by kernel name, per step (H200).

  python integration/gpu/profile_decode.py --mode vosti|default|bi --model llama31-8b --batch 4 --context 1024
  python integration/gpu/profile_decode.py --phase prefill --mode vosti-tma --batch 4 --context 1024

The engine runs in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0) so torch.profiler sees its kernels.
Decode: the prompts are prefilled first; only decode steps are timed (wall, no profiler) and then profiled.
Prefill: a batch of fresh prompts (prefix caching is off) is prefilled once to warm up, then another is timed
and a third profiled, each step by step until every request decodes. Prints one JSON line per kernel group
and a summary: wall ms/step, GPU busy ms/step (wall well above busy: the host is what the step waits on),
kernels/step.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from vosti_plugin.integration.bench.modes import MODES, engine_kwargs, prepare_environment


def _group(name: str) -> str:
    for key in ("mm_splitk_partial", "mm_splitk_reduce", "mm_kernel", "paged_attention", "attention_segment",
                "combine", "kv_write", "rmsnorm", "rms_norm", "softmax", "silu", "gelu", "rotary", "nvjet",
                "gemm", "Memcpy", "Memset", "flash", "triton_"):
        if key.lower() in name.lower():
            return key
    return name[:60]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--model", default="llama31-8b")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--phase", choices=("decode", "prefill"), default="decode")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    prepare_environment(a.mode)
    import torch
    from vllm import LLM, SamplingParams

    from vosti_plugin.integration.bench.throughput import resolve_model

    model_dir, geometry, load_format = resolve_model(a.model)
    kw = dict(model=str(model_dir), load_format=load_format, skip_tokenizer_init=True, dtype="bfloat16",
              max_model_len=a.context + 4 * a.steps + 64, gpu_memory_utilization=0.85,
              enable_prefix_caching=False, seed=0, max_num_seqs=max(64, a.batch))
    kw.update(engine_kwargs(a.mode))
    if not torch.cuda.is_available():            # logic check on CPU: tiny model, fp32
        kw.update(dtype="float32", block_size=32)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    llm = LLM(**kw)
    engine = llm.llm_engine
    rng = random.Random(0)
    params = SamplingParams(temperature=0.0, max_tokens=3 * a.steps + 8, ignore_eos=True)
    vocab = min(geometry["vocab_size"], 100000)
    batches = iter(range(1000))

    def add_batch() -> list[str]:
        b = next(batches)
        names = [f"b{b}r{i}" for i in range(a.batch)]
        for name in names:
            engine.add_request(name, {"prompt_token_ids": [rng.randrange(10, vocab) for _ in range(a.context)]},
                               params)
        return names

    def prefill(names: list[str]) -> int:
        """Steps until every request of the batch decodes; then the batch is aborted. Returns the steps."""
        steps = 0
        while not _decoding(engine, a.batch):
            engine.step()
            steps += 1
        engine.abort_request(names)
        return steps

    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CUDA] if torch.cuda.is_available() else [ProfilerActivity.CPU]
    if a.phase == "prefill":
        prefill(add_batch())
        names = add_batch()
        sync()
        t = time.perf_counter()
        timed_steps = prefill(names)
        sync()
        wall_ms = (time.perf_counter() - t) * 1e3 / timed_steps
        names = add_batch()
        with profile(activities=acts) as prof:
            a.steps = prefill(names)
            sync()
    else:
        add_batch()
        while not _decoding(engine, a.batch):         # prefill (possibly chunked) until every request decodes
            engine.step()
        for _ in range(4):
            engine.step()
        sync()
        t = time.perf_counter()
        for _ in range(a.steps):
            engine.step()
        sync()
        wall_ms = (time.perf_counter() - t) * 1e3 / a.steps
        with profile(activities=acts) as prof:
            for _ in range(a.steps):
                engine.step()
            sync()
    per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    busy_us = 0.0
    for ev in prof.events():
        if ev.device_type.name != ("CUDA" if torch.cuda.is_available() else "CPU"):
            continue
        us = ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
        g = per[_group(ev.name)]
        g[0] += us
        g[1] += 1
        busy_us += us
    rows = sorted(per.items(), key=lambda kv: -kv[1][0])
    for name, (us, n) in rows[:25]:
        print(json.dumps({"kernel": name, "ms_per_step": round(us / 1e3 / a.steps, 4),
                          "launches_per_step": round(n / a.steps, 1)}))
    summary = {"mode": a.mode, "phase": a.phase, "model": a.model, "batch": a.batch, "context": a.context,
               "steps": a.steps,
               "wall_ms_per_step": round(wall_ms, 3), "gpu_busy_ms_per_step": round(busy_us / 1e3 / a.steps, 3),
               "kernels_per_step": round(sum(n for _, n in per.values()) / a.steps, 1),
               "tok_s": round(a.batch * a.context * 1e3 / (wall_ms * timed_steps) if a.phase == "prefill"
                              else a.batch * 1e3 / wall_ms, 1)}
    print("SUMMARY " + json.dumps(summary), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"summary": summary, "kernels": [
            {"kernel": k, "ms_per_step": v[0] / 1e3 / a.steps, "launches_per_step": v[1] / a.steps}
            for k, v in rows]}, indent=1))
    return 0


def _decoding(engine, batch: int) -> bool:
    """True once the scheduler has no request with prompt tokens still to compute."""
    sched = engine.engine_core.engine_core.scheduler
    running = list(sched.running)
    return len(running) == batch and all(r.num_computed_tokens >= r.num_prompt_tokens for r in running)


if __name__ == "__main__":
    sys.exit(main())
