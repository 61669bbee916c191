"""vosti KV cache under memory pressure on a GPU: eviction + preemption + chunked prefill + prefix hits
must leave every request's raw logits bitwise equal to a cold solo run; plus scheduler overhead.

    python integration/gpu/kvcache_pressure_check.py --model llama31-8b --layers 8 --out $OUT/kvcache_llama.json
    python integration/gpu/kvcache_pressure_check.py --model gemma3-4b --layers 12 --out $OUT/kvcache_gemma.json
    python integration/gpu/kvcache_pressure_check.py --cpu-smoke --out /tmp/kvcache.json   # logic, no GPU (~3 min)

Workload: N requests (default 6) of ~3K tokens sharing a 1K-token prefix, 64 generated tokens each,
on a page pool (num_gpu_blocks_override) that holds two of them but not their decodes, token budget 512
(chunked prefill), vosti's page size (64; 32 on CPU), vosti's audit mode on (`--no-audit` for the
overhead numbers). References: each prompt alone after reset_prefix_cache(). Variants: all together
from an empty cache, then all together again in reverse order (warm cache). Reported per variant:
bitwise-equal requests (every float of the top-20 raw logits compared by its bits), max |diff|,
cached tokens per request; engine-wide: preemptions, evictions, vosti hit statistics, audit checks,
schedule() ms per step. `--stock-scheduler` adds the same run with vLLM's own scheduler and prefix
cache (same attention backend) for the overhead comparison. Exit code 0 iff every vosti variant is
bitwise equal, the run preempted and evicted, and the warm variant hit the prefix cache.
`--cpu-smoke`: the bundled tiny model on CPU through the Triton interpreter with the vosti backend
(4 requests of 60-120 tokens, 8 generated tokens, 8 pages of 32 tokens, budget 48).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import struct
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


def _prompt_lengths(args) -> list[int]:
    return [args.shared + args.tail + args.step * i for i in range(args.requests)]


def _prompts(lengths: list[int], shared_len: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    shared = [rng.randrange(3, vocab) for _ in range(shared_len)]
    return [shared + [rng.randrange(3, vocab) for _ in range(n - shared_len)] for n in lengths]


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)  # exact: the engine's fp32/bf16 logits widen to float64 without rounding


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
            if _bits(a[k]) != _bits(b[k]):
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
    from vosti_plugin.integration.engine_presets import has_gpu, llm_kwargs, prepare_environment

    prepare_environment(in_process=True)
    os.environ["VOSTI_AUDIT"] = "1" if args.audit else "0"
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    from vosti_plugin.integration.harness import models
    from vosti_plugin.integration.harness.weights import redraw

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
    from vosti_plugin.selection import DEFAULT_PAGE_SIZE

    gpu = has_gpu()
    groups = _expected_kv_groups(config)
    page = args.page or (DEFAULT_PAGE_SIZE if gpu else 32)  # CPU: the stock backend needs multiples of 32
    lengths = _prompt_lengths(args)
    max_model_len = -(-(max(lengths) + args.max_tokens) // page) * page
    if args.pages == 0:
        # Room for the two shortest requests (sharing the prefix) plus 3 pages, in every KV group
        # (vosti keeps sliding-window pages): both decoding outgrow it, so one gets preempted.
        short = sorted(lengths)
        per_group = -(-short[0] // page) + -(-short[1] // page) - args.shared // page + 3
        per_group = max(per_group, max_model_len // page)  # vLLM refuses a pool below one max-length request
        args.pages = groups * per_group + 1  # + vLLM's null page
    from vllm import LLM, SamplingParams

    overrides = dict(
        skip_tokenizer_init=True,
        block_size=page,
        max_model_len=max_model_len,
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
    result: dict = {"model": args.model, "gpu": gpu, "layers": args.layers, "pages": args.pages, "page_size": page,
                    "prompt_lengths": lengths, "max_tokens": args.max_tokens, "budget": args.budget,
                    "kv_groups": groups, "audit": args.audit, "engines": {}}
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
        prompts = _prompts(lengths, args.shared, vocab)
        params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0, logprobs=20, ignore_eos=True)
        feed = lambda ps: [{"prompt_token_ids": p} for p in ps]  # noqa: E731
        cold, t = [], time.perf_counter()
        for p in prompts:
            assert llm.reset_prefix_cache()
            out = llm.generate(feed([p]), params, use_tqdm=False)[0]
            assert not out.num_cached_tokens, "a cold run hit the cache after reset_prefix_cache()"
            cold.append(_rows(out))
        cold_firsts = {tuple(sorted(rows[0][1].items())) for rows in cold}
        print(label, f"cold runs: {time.perf_counter() - t:.1f}s, {len(cold_firsts)} distinct first rows of "
              f"{len(cold)}", flush=True)
        timer = _ScheduleTimer(sched)
        preempt0 = getattr(sched, "vosti_num_preemptions", None)
        manager = sched.kv_cache_manager
        evict0 = manager.hit_stats.evictions if hasattr(manager, "hit_stats") else None
        shadow = getattr(manager, "shadow", None)
        checks0 = shadow.num_checks if shadow is not None else None
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
                "schedule_steps": timer.steps, "distinct_cold_first_rows": len(cold_firsts)}
        if checks0 is not None:
            info["audit_checks"] = shadow.num_checks - checks0
        if preempt0 is not None:
            info["preemptions"] = sched.vosti_num_preemptions - preempt0
        if evict0 is not None:
            stats = manager.hit_stats
            info["evictions"] = stats.evictions - evict0
            info["hit_stats"] = {"queries": stats.queries, "hits": stats.hits, "query_tokens": stats.query_tokens,
                                 "hit_tokens": stats.hit_tokens, "hit_rate": stats.hit_rate}
        result["engines"][label] = info
        print(label, "preemptions", info.get("preemptions"), "evictions", info.get("evictions"),
              "audit_checks", info.get("audit_checks"), "hit_stats", json.dumps(info.get("hit_stats")),
              f"schedule {info['schedule_ms_per_step']:.3f} ms/step", flush=True)
        del llm
    v = result["engines"]["vosti"]
    failures = [f"{name}: {x['bitwise_equal']}/{x['total']} bitwise equal (max |diff| {x['max_abs_diff']:.3g})"
                for name, x in v["variants"].items() if x["bitwise_equal"] != x["total"]]
    if not v.get("preemptions"):
        failures.append("no preemption: the pool no longer forces it")
    if not v.get("evictions"):
        failures.append("no eviction: the pool no longer forces it")
    if not any(v["variants"]["together-warm-reversed"]["cached_tokens"]):
        failures.append("no prefix hit in the warm variant")
    if v["distinct_cold_first_rows"] < len(lengths):
        failures.append("distinct prompts gave equal first logits: the model does not see context")
    result["failures"] = failures
    result["pass"] = not failures
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama31-8b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=0, help="truncate the geometry to N layers (0: all)")
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--shared", type=int, default=1024)
    ap.add_argument("--tail", type=int, default=2048)
    ap.add_argument("--step", type=int, default=37, help="each further request's prompt is this much longer")
    ap.add_argument("--page", type=int, default=0, help="page size; 0: vosti's default (64), 32 on CPU")
    ap.add_argument("--no-audit", dest="audit", action="store_false", help="audit mode off (overhead numbers)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--budget", type=int, default=512)
    ap.add_argument("--pages", type=int, default=0, help="page pool; 0: two requests + 3 pages per KV group")
    ap.add_argument("--backend", default="vosti", help="vosti, or 'stock' for vLLM's own attention")
    ap.add_argument("--stock-scheduler", action="store_true")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny model, CPU sizes, vosti through the interpreter")
    args = ap.parse_args()
    if args.cpu_smoke:
        if args.model == "llama31-8b":
            args.model = "tiny"
        args.requests, args.shared, args.tail, args.step = 4, 32, 28, 20
        args.max_tokens, args.budget = 8, 48
    result = run(args)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for failure in result["failures"]:
        print("FAILED:", failure, flush=True)
    print("RESULT", "PASS" if result["pass"] else "FAIL", json.dumps(result), flush=True)
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
