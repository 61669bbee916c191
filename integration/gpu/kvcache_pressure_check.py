"""vosti KV cache under memory pressure on a GPU: eviction + preemption + chunked prefill + prefix hits
must leave every request's raw logits bitwise equal to a cold solo run; plus scheduler overhead.

    python integration/gpu/kvcache_pressure_check.py --model llama31-8b --out $OUT/kvcache_llama.json
    python integration/gpu/kvcache_pressure_check.py --model gemma3-4b --out $OUT/kvcache_gemma.json
    python integration/gpu/kvcache_pressure_check.py --cpu-smoke --out /tmp/kvcache.json   # logic, no GPU

Workload: N requests (default 6) of ~3K tokens sharing a 1K-token prefix, 64 generated tokens each,
on a page pool (num_gpu_blocks_override) that holds two of them but not their decodes, token budget 512 (chunked
prefill). References: each prompt alone after reset_prefix_cache(). Variants: all together from an
empty cache, then all together again in reverse order (warm cache). Reported per variant: bitwise
equal requests, max |diff| of the top-20 raw logits, cached tokens per request; engine-wide:
preemptions, evictions, vosti hit statistics, schedule() ms per step. `--stock-scheduler` adds the
same run with vLLM's own scheduler and prefix cache (same attention backend) for the overhead
comparison. Exit code 0 iff every vosti variant is bitwise equal and the run preempted and evicted.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))


def _expected_kv_groups(config: dict | None) -> int:
    """vLLM's layer grouping (kv_cache_utils): group size = fewest layers of one attention type
    (or the most, when the counts are within 1.5x); one group per group-size layers of each type."""
    types = (config or {}).get("layer_types") or []
    counts = [types.count(t) for t in sorted(set(types))]
    if len(counts) < 2:
        return 1
    size = min(counts) if max(counts) >= 1.5 * min(counts) else max(counts)
    return sum(-(-c // size) for c in counts)


def _prompts(n: int, shared_len: int, tail_len: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    shared = [rng.randrange(3, vocab) for _ in range(shared_len)]
    return [shared + [rng.randrange(3, vocab) for _ in range(tail_len + 37 * i)] for i in range(n)]


def _rows(output) -> list[tuple[int, dict[int, float]]]:
    comp = output.outputs[0]
    steps = zip(comp.token_ids, comp.logprobs)
    return [(tok, {tid: float(lp.logprob) for tid, lp in step.items()}) for tok, step in steps]


def _diff(got, want) -> tuple[bool, float]:
    if len(got) != len(want):
        return False, float("inf")
    worst, same = 0.0, True
    for (ta, a), (tb, b) in zip(got, want):
        if ta != tb or a.keys() != b.keys():
            return False, float("inf")
        for k in a:
            if a[k] != b[k]:
                same = False
                worst = max(worst, abs(a[k] - b[k]))
    return same, worst


class _ScheduleTimer:
    def __init__(self, sched) -> None:
        self.sched, self.seconds, self.steps = sched, 0.0, 0
        self._orig = sched.schedule

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return self._orig(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t
                self.steps += 1

        sched.schedule = timed

    def ms_per_step(self) -> float:
        return 1e3 * self.seconds / max(self.steps, 1)


def run(args) -> dict:
    from vosti_plugin.engine_presets import has_gpu, llm_kwargs, prepare_environment

    prepare_environment(in_process=True)
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    from integration.harness import models
    from integration.harness.weights import redraw

    spec = models.get(args.model)
    config = dict(spec.config) if spec.config else None
    if config and args.layers:
        config["num_hidden_layers"] = args.layers
        if "layer_types" in config:
            config["layer_types"] = config["layer_types"][: args.layers]
            if "full_attention" not in config["layer_types"]:
                config["layer_types"][-1] = "full_attention"
    spec = models.ModelSpec(spec.name, config, spec.gemma_norms) if config else spec
    path = str(models.materialize(spec))
    gpu = has_gpu()
    groups = _expected_kv_groups(config)
    page = 16 if gpu else 32
    if args.pages == 0:
        # Room for the two shortest requests (sharing the prefix) plus 3 pages, in every KV group
        # (vosti keeps sliding-window pages): both decoding outgrow it, so one gets preempted.
        lengths = sorted(args.shared + args.tail + 37 * i for i in range(args.requests))
        per_group = -(-lengths[0] // page) + -(-lengths[1] // page) - args.shared // page + 3
        args.pages = groups * per_group + 1
    from vllm import LLM, SamplingParams

    overrides = dict(
        skip_tokenizer_init=True,
        max_model_len=args.shared + args.tail + 40 * args.requests + args.max_tokens + 64,
        max_num_batched_tokens=args.budget,
        num_gpu_blocks_override=args.pages,
        max_num_seqs=args.requests,
        max_logprobs=20,
    )
    if gpu:
        overrides["dtype"] = "bfloat16"
        overrides["gpu_memory_utilization"] = 0.6
    if spec.dummy:
        overrides["load_format"] = "dummy"
    result: dict = {"model": args.model, "gpu": gpu, "layers": args.layers, "pages": args.pages,
                    "kv_groups": groups, "engines": {}}
    engines = [("vosti", True)] + ([("stock-scheduler", False)] if args.stock_scheduler else [])
    for label, vosti in engines:
        kw = llm_kwargs(path, vosti=vosti and args.backend == "vosti", **overrides)
        if vosti:
            kw["scheduler_cls"] = "vosti_plugin.scheduler.VostiScheduler"
        elif args.backend == "vosti":
            kw["attention_backend"] = "vosti"
            kw["scheduler_cls"] = "vllm.v1.core.sched.scheduler.Scheduler"
        t0 = time.perf_counter()
        try:
            llm = LLM(**kw)
        except Exception as exc:  # e.g. the vosti launch check refusing a stock scheduler
            if vosti:
                raise
            result["engines"][label] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        startup = time.perf_counter() - t0
        if spec.dummy:
            llm.apply_model(redraw)
        sched = llm.llm_engine.engine_core.engine_core.scheduler
        vocab = spec.vocab_size
        prompts = _prompts(args.requests, args.shared, args.tail, vocab)
        params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0, logprobs=20, ignore_eos=True)
        feed = lambda ps: [{"prompt_token_ids": p} for p in ps]  # noqa: E731
        cold = []
        for p in prompts:
            assert llm.reset_prefix_cache()
            cold.append(_rows(llm.generate(feed([p]), params, use_tqdm=False)[0]))
        timer = _ScheduleTimer(sched)
        preempt0 = getattr(sched, "vosti_num_preemptions", None)
        manager = sched.kv_cache_manager
        evict0 = manager.hit_stats.evictions if hasattr(manager, "hit_stats") else None
        assert llm.reset_prefix_cache()
        variants = {}
        for name, order in (("together-empty-cache", prompts), ("together-warm-reversed", prompts[::-1])):
            t = time.perf_counter()
            outs = llm.generate(feed(order), params, use_tqdm=False)
            wall = time.perf_counter() - t
            if order is not prompts:
                outs = outs[::-1]
            checks = [_diff(_rows(o), c) for o, c in zip(outs, cold)]
            variants[name] = {
                "bitwise_equal": sum(s for s, _ in checks),
                "total": len(checks),
                "max_abs_diff": max(d for _, d in checks),
                "cached_tokens": [o.num_cached_tokens for o in outs],
                "wall_s": wall,
            }
            print(label, name, json.dumps(variants[name]), flush=True)
        info = {"startup_s": startup, "variants": variants, "schedule_ms_per_step": timer.ms_per_step(),
                "schedule_steps": timer.steps}
        if preempt0 is not None:
            info["preemptions"] = sched.vosti_num_preemptions - preempt0
        if evict0 is not None:
            stats = manager.hit_stats
            info["evictions"] = stats.evictions - evict0
            info["hit_stats"] = {"queries": stats.queries, "hits": stats.hits, "query_tokens": stats.query_tokens,
                                 "hit_tokens": stats.hit_tokens, "hit_rate": stats.hit_rate}
        result["engines"][label] = info
        del llm
    v = result["engines"]["vosti"]
    ok = (all(x["bitwise_equal"] == x["total"] for x in v["variants"].values())
          and v.get("preemptions", 0) > 0 and v.get("evictions", 0) > 0)
    result["pass"] = ok
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama31-8b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=0, help="truncate the geometry to N layers (0: all)")
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--shared", type=int, default=1024)
    ap.add_argument("--tail", type=int, default=2048)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--budget", type=int, default=512)
    ap.add_argument("--pages", type=int, default=0, help="page pool; 0: two requests + 3 pages per KV group")
    ap.add_argument("--backend", default="vosti", help="vosti, or 'stock' for vLLM's own attention")
    ap.add_argument("--stock-scheduler", action="store_true")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny model, small sizes, stock CPU attention")
    args = ap.parse_args()
    if args.cpu_smoke:
        if args.model == "llama31-8b":
            args.model = "tiny"
        args.requests, args.shared, args.tail = 4, 64, 150
        args.max_tokens, args.budget, args.backend = 48, 96, "stock"
    result = run(args)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("RESULT", "PASS" if result["pass"] else "FAIL", json.dumps(result), flush=True)
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
