"""The four variation classes (Vosti paper §6, docs/design.md): each runs real vLLM requests and returns
raw evidence pairs {class, case, reference, variant, meta, run}; the parent compares them bitwise.

Requests are token-id prompts at temperature 0 with top-k raw logits (logprobs_mode="raw_logits").
Outside the prefix-reuse class every request sets skip_reading_prefix_cache, so a cache hit cannot
stand in for the computation the class varies.
"""
from __future__ import annotations

import random
from collections.abc import Callable

from vosti_plugin.integration.harness.engine import StepRecorder, token_budget
from vosti_plugin.integration.harness.scale import Scale, prefix_plan
from vosti_plugin.integration.harness.views import View, encode, prompt_view, sampled_view

Progress = Callable[[str, int, int], None]


class Runner:
    def __init__(self, llm, scale: Scale, vocab: int) -> None:
        self.llm = llm
        self.scale = scale
        self.vocab = vocab
        self.k = scale.top_k
        self.recorder = StepRecorder(llm)

    def prompt(self, key: str, length: int) -> list[int]:
        rng = random.Random(f"{key}:{length}")
        return [rng.randrange(4, self.vocab) for _ in range(length)]

    def params(self, max_tokens: int, *, read_cache: bool = False, prompt_logprobs: int | None = None):
        from vllm import SamplingParams

        return SamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=self.k, ignore_eos=True,
                              detokenize=False, skip_reading_prefix_cache=not read_cache,
                              prompt_logprobs=prompt_logprobs)

    def generate(self, prompts: list[list[int]], params) -> list:
        self.recorder.clear()
        return self.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)


def _pair(cls: str, case: str, reference: View, variant: View, meta: dict, run: bool = True,
          not_run_reason: str | None = None) -> dict:
    return {"class": cls, "case": case, "reference": encode(reference), "variant": encode(variant),
            "meta": meta, "run": run, "not_run_reason": not_run_reason}


def _slot(order: str, size: int) -> int:
    return {"first": 0, "middle": size // 2, "last": size - 1}[order]


def batch_composition(r: Runner, progress: Progress) -> list[dict]:
    """Each target alone vs inside batches of each size, at each position, among other targets."""
    s = r.scale
    targets = [r.prompt("batch", n) for n in s.batch_lengths]
    pool = targets + [r.prompt("batch-neighbour", n) for n in s.batch_neighbour_lengths]
    params = r.params(s.batch_decode_tokens)
    total = len(targets) * len(s.batch_sizes) * len(s.batch_orders)
    pairs: list[dict] = []
    rng = random.Random(11)
    for i, target in enumerate(targets):
        alone = sampled_view(r.generate([target], params)[0], r.k)
        for size in s.batch_sizes:
            for order in s.batch_orders:
                others = rng.sample([j for j in range(len(pool)) if j != i], size - 1)
                slot = _slot(order, size)
                members = [pool[j] for j in others]
                members.insert(slot, target)
                out = r.generate(members, params)
                rid = out[slot].request_id
                meta = {"length": len(target), "batch": [len(m) for m in members], "slot": slot,
                        "max_company": r.recorder.max_company(rid), "chunks": r.recorder.chunks(rid)}
                pairs.append(_pair("batch", f"len={len(target)} size={size} order={order}",
                                   alone, sampled_view(out[slot], r.k), meta))
                progress("batch", len(pairs), total)
    return pairs


def neighbour_length(target_len: int, budget: int) -> int:
    """Prompt length of the neighbour scheduled ahead of the target in the first step. It leaves the
    target a first chunk of budget - budget//2 - 3 tokens (off the budget grid), or half the prompt when
    the prompt is shorter than that, so a prompt shorter than the budget is chunked too."""
    first_chunk = max(1, min(target_len // 2, budget - budget // 2 - 3))
    return budget - first_chunk


def chunked_prefill(r: Runner, progress: Progress) -> list[dict]:
    """Unchunked prefill alone vs prefill at each token budget behind a neighbour that fills the first
    step's budget but for the target's first chunk (`neighbour_length`), so every prompt is split and
    its chunk grid is shifted off the budget grid."""
    s = r.scale
    params = r.params(s.chunk_decode_tokens)
    total = len(s.chunk_lengths) * len(s.chunk_budgets)
    pairs: list[dict] = []
    for n in s.chunk_lengths:
        target = r.prompt("chunk", n)
        out = r.generate([target], params)[0]
        whole, ref_chunks = sampled_view(out, r.k), r.recorder.chunks(out.request_id)
        for budget in s.chunk_budgets:
            neighbour = r.prompt("chunk-neighbour", neighbour_length(n, budget))
            with token_budget(r.llm, budget):
                outs = r.generate([neighbour, target], params)
            chunks = r.recorder.chunks(outs[1].request_id)
            prefill_chunks = _prefill_chunks(chunks, n)
            meta = {"length": n, "budget": budget, "reference_chunks": _prefill_chunks(ref_chunks, n),
                    "chunks": prefill_chunks}
            chunked = len(prefill_chunks) > 1
            pairs.append(_pair("chunk", f"len={n} budget={budget}", whole, sampled_view(outs[1], r.k), meta,
                               run=chunked, not_run_reason=None if chunked else "prefill was not chunked"))
            progress("chunk", len(pairs), total)
    return pairs


def _prefill_chunks(chunks: list[int], prompt_len: int) -> list[int]:
    done, out = 0, []
    for c in chunks:
        if done >= prompt_len:
            break
        out.append(c)
        done += c
    return out


def prefill_vs_decode(r: Runner, progress: Progress) -> list[dict]:
    """Position p's logits from decode steps vs from a prefill of tokens[0..p] (prompt logprobs).

    Decode: prompt P (length L) generates `positions` tokens greedily; step j is position L-1+j
    (step 0 is P's own last prefill row; steps 1.. are decode rows). Prefill: S = P + the first
    positions-1 generated tokens, run with prompt_logprobs (rows 0..len(S)-2) plus one sampled
    token (row len(S)-1), in chunks of at most pd_prefill_budget tokens."""
    s = r.scale
    m = s.pd_positions
    total = len(s.pd_lengths) * m
    budget = min(s.pd_prefill_budget, s.max_num_batched_tokens)
    pairs: list[dict] = []
    for n in s.pd_lengths:
        prompt = r.prompt("prefill-decode", n)
        decoded = sampled_view(r.generate([prompt], r.params(m))[0], r.k)
        sequence = prompt + [step.token_id for step in decoded[: m - 1]]
        with token_budget(r.llm, budget):
            out = r.generate([sequence], r.params(1, prompt_logprobs=r.k))[0]
        rows = prompt_view(out, r.k, start=n - 1) + sampled_view(out, r.k)
        chunks = _prefill_chunks(r.recorder.chunks(out.request_id), len(sequence))
        for j, (dec, pre) in enumerate(zip(decoded, rows)):
            meta = {"length": n, "position": n - 1 + j, "decode_step": j, "prefill_chunks": chunks}
            pairs.append(_pair("prefill_decode", f"len={n} pos={n - 1 + j}", (dec,), (pre,), meta))
            progress("prefill_decode", len(pairs), total)
    return pairs


def prefix_reuse(r: Runner, progress: Progress) -> list[dict]:
    """The same request cold (no cache reads) vs after a primer left reusable pages; a case counts
    only when the warm request reports a hit (RequestOutput.num_cached_tokens > 0)."""
    s = r.scale
    plan = prefix_plan(s)
    params_cold = r.params(s.prefix_decode_tokens)
    params_warm = r.params(s.prefix_decode_tokens, read_cache=True)
    pairs: list[dict] = []
    for idx, (kind, n, shared) in enumerate(plan):
        key = f"prefix-{kind}-{idx}"
        r.llm.reset_prefix_cache()
        hit_floor = 0
        if kind == "generated":
            primer = r.prompt(key, n)
            m = s.prefix_generated_tokens
            gen = r.generate([primer], r.params(m, read_cache=True))[0]
            generated = [int(t) for t in gen.outputs[0].token_ids]
            target = primer + generated[: m - 1] + r.prompt(key + "-tail", 7)
            hit_floor = n        # the hit must reach into pages that hold generated tokens
        else:
            target = r.prompt(key, n)
            if kind == "full":
                primer = target
            elif kind == "partial":
                primer = target[:shared]
            else:  # divergent: shares `shared` tokens, then continues differently
                primer = target[:shared] + r.prompt(key + "-other", n - shared)
            r.generate([primer], r.params(s.prefix_decode_tokens, read_cache=True))
        warm_out = r.generate([target], params_warm)[0]
        hit = int(warm_out.num_cached_tokens or 0)
        warm = sampled_view(warm_out, r.k)
        cold = sampled_view(r.generate([target], params_cold)[0], r.k)
        confirmed = hit > hit_floor
        reason = None if confirmed else (f"no cache hit (num_cached_tokens={hit})" if hit == 0 else
                                         f"hit {hit} did not reach past the primer's prompt ({n} tokens)")
        meta = {"kind": kind, "length": len(target), "shared": shared, "num_cached_tokens": hit}
        pairs.append(_pair("prefix", f"{kind} len={len(target)} shared={shared}", cold, warm, meta,
                           run=confirmed, not_run_reason=reason))
        progress("prefix", idx + 1, len(plan))
    return pairs


CLASSES: dict[str, Callable[[Runner, Progress], list[dict]]] = {
    "batch": batch_composition,
    "chunk": chunked_prefill,
    "prefill_decode": prefill_vs_decode,
    "prefix": prefix_reuse,
}
