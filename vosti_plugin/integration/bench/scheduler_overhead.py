"""Host time vosti's scheduler + exact-prefix KV manager add per engine step, against vLLM's own.

  python -m vosti_plugin.integration.bench.scheduler_overhead [--batches 4,32,128] [--decode 64] [--prompt 200]

Runs on any platform with the bundled tiny model and vLLM's own attention, so only the scheduler
differs between the two runs; times `schedule()` and `update_from_output()` (the host work between
two GPU steps when async scheduling is off) and prints ms per step for each scheduler and batch.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

STOCK = "vllm.v1.core.sched.scheduler.Scheduler"
VOSTI = "vosti_plugin.scheduler.VostiScheduler"


def _timed(obj, name: str, totals: dict) -> None:
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - t
            if name == "schedule":
                totals["steps"] = totals.get("steps", 0) + 1

    setattr(obj, name, wrapper)


def measure(scheduler_cls: str, batches: list[int], prompt_len: int, decode: int) -> list[dict]:
    import torch
    from vllm import LLM, SamplingParams

    from vosti_plugin.integration.tiny_model import ensure_tiny_model

    llm = LLM(model=str(ensure_tiny_model()), skip_tokenizer_init=True, dtype="float32", block_size=32,
              enable_prefix_caching=True, max_num_seqs=max(batches), max_model_len=prompt_len + decode + 32,
              max_num_batched_tokens=max(2048, prompt_len), scheduler_cls=scheduler_cls, enforce_eager=True,
              seed=0)
    sched = llm.llm_engine.engine_core.engine_core.scheduler
    params = SamplingParams(temperature=0.0, max_tokens=decode, ignore_eos=True)
    g = torch.Generator().manual_seed(0)
    rows = []
    for batch in batches:
        prompts = [{"prompt_token_ids": torch.randint(3, 500, (prompt_len,), generator=g).tolist()}
                   for _ in range(batch)]
        totals: dict = {}
        _timed(sched, "schedule", totals)
        _timed(sched, "update_from_output", totals)
        llm.generate(prompts, params, use_tqdm=False)
        del sched.schedule, sched.update_from_output      # back to the class methods
        steps = max(totals.get("steps", 1), 1)
        rows.append({"scheduler": scheduler_cls.rsplit(".", 1)[-1], "batch": batch, "steps": steps,
                     "schedule_ms": 1e3 * totals["schedule"] / steps,
                     "update_ms": 1e3 * totals["update_from_output"] / steps})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="4,32,128")
    ap.add_argument("--prompt", type=int, default=200)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--scheduler", choices=["stock", "vosti", "both"], default="both")
    a = ap.parse_args(argv)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    batches = [int(x) for x in a.batches.split(",")]
    chosen = {"stock": [STOCK], "vosti": [VOSTI], "both": [STOCK, VOSTI]}[a.scheduler]
    rows = [r for cls in chosen for r in measure(cls, batches, a.prompt, a.decode)]
    from rich.console import Console
    from rich.table import Table

    table = Table(title="host time per engine step (ms)")
    for col in ("scheduler", "batch", "steps", "schedule()", "update_from_output()", "total"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["scheduler"], str(r["batch"]), str(r["steps"]), f"{r['schedule_ms']:.3f}",
                      f"{r['update_ms']:.3f}", f"{r['schedule_ms'] + r['update_ms']:.3f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
