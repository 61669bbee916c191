"""Agentic session replay: concurrent multi-turn sessions that reuse a shared prefix and their own history.

  python -m vosti_plugin.integration.bench.agentic --mode vosti|vosti-sync|vosti-async|default|bi --model llama31-8b --out result.json
  CPU smoke: --model tiny --dtype float32 --sessions 2 --turns 2 --first-len 96 --shared-len 64 --turn-len 16 --out-len 8

Each of --sessions sessions: turn 1 sends a --first-len prompt whose first --shared-len tokens are shared by
all sessions; every later turn appends --turn-len new tokens to the retained conversation (previous prompt +
its output); each turn decodes --out-len tokens; --think-s pause between turns. Prefix caching is on (that
is the point). Reported: wall time per session and in all, cached-token ratio per turn.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

from vosti_plugin.integration.bench.modes import MODES, engine_kwargs, prepare_environment


async def _session(engine, sid: int, shared: list[int], a, rng: random.Random, SamplingParams, vocab: int) -> dict:
    history = shared + [rng.randrange(10, vocab) for _ in range(a.first_len - len(shared))]
    turns = []
    t_start = time.perf_counter()
    for turn in range(a.turns):
        if turn:
            await asyncio.sleep(a.think_s)
            history = history + [rng.randrange(10, vocab) for _ in range(a.turn_len)]
        params = SamplingParams(temperature=0.0, max_tokens=a.out_len, ignore_eos=True)
        t0 = time.perf_counter()
        final = None
        async for out in engine.generate({"prompt_token_ids": history}, params, f"s{sid}-t{turn}"):
            final = out
        tokens = list(final.outputs[0].token_ids)
        turns.append({"turn": turn, "prompt_len": len(history), "seconds": time.perf_counter() - t0,
                      "cached_tokens": final.num_cached_tokens or 0})
        history = history + tokens
    return {"session": sid, "seconds": time.perf_counter() - t_start, "turns": turns}


async def _run(a) -> dict:
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    from vosti_plugin.integration.bench.throughput import resolve_model

    model_dir, geometry, load_format = resolve_model(a.model)
    kw = dict(model=str(model_dir), load_format=load_format, skip_tokenizer_init=True, dtype=a.dtype,
              max_model_len=a.first_len + a.turns * (a.turn_len + a.out_len) + 64, gpu_memory_utilization=0.85,
              enable_prefix_caching=True, seed=0, max_num_seqs=64)
    kw.update(engine_kwargs(a.mode, a.backend))
    t0 = time.perf_counter()
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**kw))
    startup = time.perf_counter() - t0
    rng = random.Random(0)
    vocab = min(30000, geometry["vocab_size"])
    shared = [rng.randrange(10, vocab) for _ in range(a.shared_len)]
    try:
        t0 = time.perf_counter()
        sessions = await asyncio.gather(*[
            _session(engine, s, shared, a, random.Random(100 + s), SamplingParams, vocab) for s in range(a.sessions)])
        total = time.perf_counter() - t0
    finally:
        engine.shutdown()
    return {"mode": a.mode, "backend": a.backend, "model": a.model, "startup_s": startup, "total_s": total,
            "mean_session_s": sum(s["seconds"] for s in sessions) / len(sessions), "sessions": sessions,
            "params": {k: getattr(a, k) for k in ("sessions", "turns", "first_len", "shared_len", "turn_len",
                                                  "out_len", "think_s")}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--backend", default=None)
    ap.add_argument("--model", default="llama31-8b")
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--first-len", type=int, default=16384)
    ap.add_argument("--shared-len", type=int, default=8192)
    ap.add_argument("--turn-len", type=int, default=256)
    ap.add_argument("--out-len", type=int, default=768)
    ap.add_argument("--think-s", type=float, default=0.5)
    ap.add_argument("--dtype", default="bfloat16", help="float32 for a CPU smoke run (vosti on CPU is fp32)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    prepare_environment(a.mode)
    res = asyncio.run(_run(a))
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps({k: v for k, v in res.items() if k != "sessions"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
