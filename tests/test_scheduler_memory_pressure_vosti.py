"""End to end on real vLLM (CPU, in-process) with the whole of vosti selected — attention backend,
VostiScheduler, exact-prefix KV manager, audit mode on: a page pool too small for the requests forces
preemption by recompute and eviction of cached pages, and every request's raw logits (full vocabulary,
every generated position) are still bitwise equal to its cold run alone. Runs with VostiScheduler and with
VostiAsyncScheduler (output placeholders, pages published once their tokens are known); vLLM's CPU platform
turns the async overlap itself off, so that part is checked on GPU (harness mode `vosti-async`).

Sized for the Triton interpreter (~0.1 s per scheduled token, ~0.3 s per step on this model): four
prompts of 60-124 tokens sharing one 32-token page, 8 generated tokens each, 7 usable pages of 32
tokens, a token budget of 48 (chunk ends inside pages). Prompt lengths put page boundaries inside the
decodes (60 -> 64, 90/92 -> 96, 124 -> 128), so running requests outgrow the pool while others hold it.
"""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PAGE = 32
POOL_PAGES = 8  # vLLM keeps one as its null page: 7 usable, fewer than the 4 requests need together
TOKEN_BUDGET = 48
MAX_TOKENS = 8
SHARED_PREFIX = 32
PROMPT_LENGTHS = (90, 124, 60, 92)


def _prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(55)
    shared = torch.randint(3, 500, (SHARED_PREFIX,), generator=g).tolist()
    return [shared + torch.randint(3, 500, (n - SHARED_PREFIX,), generator=g).tolist() for n in PROMPT_LENGTHS]


@pytest.fixture(scope="module", params=["VostiScheduler", "VostiAsyncScheduler"])
def pressured_llm(request, tiny_model_path):
    from vosti_plugin.integration.engine_presets import build_llm

    engine = build_llm(
        tiny_model_path,
        skip_tokenizer_init=True,
        block_size=PAGE,
        num_gpu_blocks_override=POOL_PAGES,
        max_num_batched_tokens=TOKEN_BUDGET,
        max_model_len=160,
        max_num_seqs=len(PROMPT_LENGTHS),
        max_logprobs=-1,
        enforce_eager=True,
        scheduler_cls=f"vosti_plugin.scheduler.{request.param}",
        async_scheduling=False,   # vLLM's CPU platform forces it off; the GPU harness runs mode vosti-async
    )
    yield engine
    del engine


def _scheduler(engine):
    return engine.llm_engine.engine_core.engine_core.scheduler


def _generate_on_shallow_stack(engine, inputs, params):
    """engine.generate on a fresh thread. CPython 3.11 keeps frames in 16 KiB chunks and unmaps a chunk
    as soon as it empties; under pytest's deep stack a chunk edge fell inside the Triton interpreter's
    innermost calls (measured: ~27k mmap+munmap per second, more than half the CPU time in the kernel,
    315 s instead of 100 s). A new thread starts its frame stack empty, as a plain script does."""
    result: dict = {}

    def target():
        try:
            result["outputs"] = engine.generate(inputs, params, use_tqdm=False)
        except BaseException as exc:  # re-raised on the test's thread
            result["error"] = exc

    worker = threading.Thread(target=target, name="vosti-pressure-generate")
    worker.start()
    worker.join()
    if "error" in result:
        raise result["error"]
    return result["outputs"]


def _run(engine, prompts) -> list[tuple[int, list]]:
    """Per request: (cached prompt tokens, per generated position (token, all raw logits as float hex))."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, logprobs=-1, ignore_eos=True)
    outs = _generate_on_shallow_stack(engine, [{"prompt_token_ids": p} for p in prompts], params)
    result = []
    for out in outs:
        comp = out.outputs[0]
        assert len(comp.token_ids) == MAX_TOKENS
        rows = [
            (tok, tuple(sorted((tid, float(lp.logprob).hex()) for tid, lp in step.items())))
            for tok, step in zip(comp.token_ids, comp.logprobs)
        ]
        result.append((out.num_cached_tokens or 0, rows))
    return result


def test_vosti_under_memory_pressure_gives_raw_logits_bitwise_equal_to_cold_runs(pressured_llm, request):
    from vosti_plugin import forward_counters
    from vosti_plugin.vllm.kv_manager import VostiKVCacheManager
    from vosti_plugin.scheduler import VostiAsyncScheduler, VostiScheduler

    sched = _scheduler(pressured_llm)
    manager = sched.kv_cache_manager
    wanted = request.node.callspec.params["pressured_llm"]
    assert type(sched).__name__ == wanted and isinstance(sched, VostiScheduler)
    assert isinstance(sched, VostiAsyncScheduler) == (wanted == "VostiAsyncScheduler")
    assert isinstance(manager, VostiKVCacheManager)
    assert sched.vosti_audit and manager.shadow is not None, "audit mode must be on (tests/conftest.py)"
    prompts = _prompts()

    colds = []
    with forward_counters.counting() as calls:
        for prompt in prompts:
            assert pressured_llm.reset_prefix_cache()
            ((cached, rows),) = _run(pressured_llm, [prompt])
            assert cached == 0
            colds.append(rows)
    assert calls["attention"] > 0, "vosti attention did not run"
    assert sched.vosti_num_preemptions == 0, "a request alone must fit the pool"
    vocab = len(colds[0][0][1])
    assert vocab == 512 and all(len(row) == vocab for rows in colds for _, row in rows)
    assert len({rows[0][1] for rows in colds}) == len(prompts), "distinct prompts gave equal logits: blind test"

    preemptions, evictions = sched.vosti_num_preemptions, manager.hit_stats.evictions
    audit_checks = manager.shadow.num_checks
    assert pressured_llm.reset_prefix_cache()
    together = _run(pressured_llm, prompts)  # empty cache: only the shared page can hit
    preempted_together = sched.vosti_num_preemptions - preemptions
    warm_reversed = _run(pressured_llm, prompts[::-1])[::-1]  # cache holds what survived eviction
    preemptions = sched.vosti_num_preemptions - preemptions
    evictions = manager.hit_stats.evictions - evictions
    print(f"preemptions {preemptions} (first pass {preempted_together}), evictions {evictions}, "
          f"cached tokens {[c for c, _ in together]} then {[c for c, _ in warm_reversed]}, "
          f"audit checks {manager.shadow.num_checks - audit_checks}")

    assert preempted_together > 0, "the setup no longer forces preemption"
    assert evictions > 0, "the setup no longer forces eviction"
    assert manager.shadow.num_checks > audit_checks
    assert any(c > 0 for c, _ in together) and any(c > SHARED_PREFIX for c, _ in warm_reversed), "no prefix hit"
    for i, ((_, first), (_, second), cold) in enumerate(zip(together, warm_reversed, colds)):
        assert first == cold, f"request {i} (together, empty cache) differs from its cold run"
        assert second == cold, f"request {i} (together, warm cache, reversed) differs from its cold run"
