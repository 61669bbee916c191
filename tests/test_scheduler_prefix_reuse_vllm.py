"""End to end on real vLLM (CPU, in-process) with VostiScheduler: a prefix-cache hit (full, partial,
divergent, generated prefix, under eviction and preemption) gives raw logits bitwise equal to a cold
run, the hit is real (num_cached_tokens > 0), the last prompt token is always computed, salted
tenants never share pages. Audit mode is on (tests/conftest.py sets VOSTI_AUDIT=1)."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.vllm

PAGE = 32  # the stock CPU attention backend needs a multiple of 32
SCHEDULER = "vosti_plugin.scheduler.VostiScheduler"
# Attention backend for these engines (VOSTI_TEST_ATTENTION_BACKEND=vosti selects ours). With vLLM's
# stock CPU kernels a decode row changes in the last bits with the batch size (measured: <= 3.1e-6 on
# this model), so requests run *together* are compared within BATCH_TOLERANCE; a wrong page would
# move logits by > 1e-2 (test_model_sees_context checks that). Batch-invariant kernels: bitwise.
_BACKEND = os.environ.get("VOSTI_TEST_ATTENTION_BACKEND", "")
ENGINE_OVERRIDES: dict = {"attention_backend": _BACKEND} if _BACKEND else {}
BATCH_TOLERANCE = 0.0 if _BACKEND.lower() == "vosti" else 1e-4
TINY_LLAMA = dict(
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    intermediate_size=344,
    vocab_size=512,
    max_position_embeddings=2048,
    tie_word_embeddings=False,
)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> str:
    from transformers import LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("tiny-llama")
    torch.manual_seed(1234)
    model = LlamaForCausalLM(LlamaConfig(**TINY_LLAMA, torch_dtype="float32"))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:  # N(0, 1/fan_in) so logits depend on the whole context
                p.normal_(0.0, p.shape[1] ** -0.5)
    model.save_pretrained(out)
    return str(out)


SCHEDULING = {
    "sync": dict(scheduler_cls=SCHEDULER, async_scheduling=False),
    "async": dict(scheduler_cls="vosti_plugin.scheduler.VostiAsyncScheduler", async_scheduling=True),
}


@pytest.fixture(scope="module")
def tiny_gemma3(tmp_path_factory) -> str:
    """Sliding window (64) on 2 of 3 layers: vLLM makes sliding-window and full-attention KV groups."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    out = tmp_path_factory.mktemp("tiny-gemma3")
    config = Gemma3TextConfig(
        **{k: v for k, v in TINY_LLAMA.items() if k != "num_hidden_layers"},
        num_hidden_layers=3,
        sliding_window=64,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        query_pre_attn_scalar=32,
        torch_dtype="float32",
    )
    config.architectures = ["Gemma3ForCausalLM"]
    torch.manual_seed(4321)
    model = Gemma3ForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, p.shape[1] ** -0.5)
    model.save_pretrained(out)
    return str(out)


def _make_llm(model: str, scheduling: str = "sync", **overrides):
    from vllm import LLM

    kwargs = dict(
        model=model,
        skip_tokenizer_init=True,
        **SCHEDULING[scheduling],
        enable_prefix_caching=True,
        block_size=PAGE,
        logprobs_mode="raw_logits",
        dtype="float32",
        max_model_len=1024,
        max_num_seqs=8,
        enforce_eager=True,
        seed=0,
    )
    kwargs.update(ENGINE_OVERRIDES)
    kwargs.update(overrides)
    return LLM(**kwargs)


@pytest.fixture(scope="module", params=sorted(SCHEDULING))
def llm(tiny_llama, request):
    engine = _make_llm(tiny_llama, request.param)
    yield engine
    del engine


@pytest.fixture(scope="module", params=sorted(SCHEDULING))
def tight_llm(tiny_llama, request):
    """Few pages, a token budget that is not a page multiple: eviction, preemption, mid-page chunk ends."""
    engine = _make_llm(
        tiny_llama, request.param, num_gpu_blocks_override=20, max_num_batched_tokens=80, max_model_len=512
    )
    yield engine
    del engine


def _scheduler(engine):
    return engine.llm_engine.engine_core.engine_core.scheduler


def _tokens(seed: int, n: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 500, (n,), generator=g).tolist()


def _run(engine, prompts, max_tokens=6, salt=None):
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, logprobs=20, ignore_eos=True)
    inputs = []
    for p in prompts:
        item = {"prompt_token_ids": list(p)}
        if salt is not None:
            item["cache_salt"] = salt
        inputs.append(item)
    outs = engine.generate(inputs, params, use_tqdm=False)
    return [(o.num_cached_tokens or 0, _raw_logits(o)) for o in outs]


def _raw_logits(output):
    """Per generated position: sampled token + top-20 raw logits, as exact float hex strings."""
    comp = output.outputs[0]
    return [
        (tok, tuple(sorted((tid, float(lp.logprob).hex()) for tid, lp in step.items())))
        for tok, step in zip(comp.token_ids, comp.logprobs)
    ]


def _max_abs_diff(got, want) -> float:
    worst = 0.0
    for (tok_a, row_a), (tok_b, row_b) in zip(got, want, strict=True):
        a, b = dict(row_a), dict(row_b)
        if tok_a != tok_b or a.keys() != b.keys():
            return float("inf")
        worst = max(worst, max(abs(float.fromhex(a[k]) - float.fromhex(b[k])) for k in a))
    return worst


def _assert_same_logits_in_batch(got, want):
    """Bitwise when BATCH_TOLERANCE == 0, else equal tokens and top-20 ids, logits within tolerance."""
    if BATCH_TOLERANCE == 0.0:
        assert got == want
    else:
        assert _max_abs_diff(got, want) <= BATCH_TOLERANCE


def _cold(engine, prompt, max_tokens=6):
    assert engine.reset_prefix_cache()
    ((cached, logits),) = _run(engine, [prompt], max_tokens)
    assert cached == 0
    return logits


def test_model_sees_context(llm):
    """Guard against a blind test: same last token, other context -> other logits."""
    a = _tokens(1, 40)
    b = _tokens(2, 39) + a[-1:]
    ((_, row_a),), ((_, row_b),) = _cold(llm, a, 1), _cold(llm, b, 1)
    shared = set(dict(row_a)) & set(dict(row_b))
    assert max(
        (abs(float.fromhex(dict(row_a)[k]) - float.fromhex(dict(row_b)[k])) for k in shared), default=1.0
    ) > 1e-2 or set(dict(row_a)) != set(dict(row_b))


def test_full_prefix_hit_equals_cold_run(llm):
    prompt = _tokens(3, 100)
    cold = _cold(llm, prompt)
    ((cached, warm),) = _run(llm, [prompt])
    assert cached == 96  # 3 full pages; the 4th page holds the last prompt token and is recomputed
    assert warm == cold


def test_last_prompt_token_is_always_computed(llm):
    prompt = _tokens(4, 3 * PAGE)  # page-aligned prompt: every page is full and cached
    cold = _cold(llm, prompt)
    ((cached, warm),) = _run(llm, [prompt])
    assert cached == 2 * PAGE
    assert warm == cold


def test_partial_and_divergent_hits_equal_cold_runs(llm):
    base = _tokens(5, 130)
    divergent_at_boundary = base[:64] + _tokens(6, 50)  # diverges on a page boundary
    divergent_mid_page = base[:80] + _tokens(7, 40)  # diverges inside page 2
    colds = [_cold(llm, p) for p in (divergent_at_boundary, divergent_mid_page)]
    assert llm.reset_prefix_cache()
    _run(llm, [base])
    warm = [_run(llm, [p])[0] for p in (divergent_at_boundary, divergent_mid_page)]
    assert [c for c, _ in warm] == [64, 64]
    assert [w for _, w in warm] == colds


def test_generated_prefix_hit_equals_cold_run(llm):
    prompt = _tokens(8, 50)
    assert llm.reset_prefix_cache()
    ((_, first),) = _run(llm, [prompt], max_tokens=60)
    generated = [tok for tok, _ in first]
    follow_up = prompt + generated[:50] + _tokens(9, 10)
    ((cached, warm),) = _run(llm, [follow_up])
    assert cached == 96  # pages 2 and 3 were filled by decoding, registered when full
    assert warm == _cold(llm, follow_up)


def test_same_step_requests_never_hit_pages_written_in_that_step(llm):
    """Two equal prompts admitted in one step: the second must not reuse pages the first is still
    writing (stock vLLM registers them at allocation and would hit them)."""
    prompt = _tokens(18, 100)
    assert llm.reset_prefix_cache()
    (cached_a, a), (cached_b, b) = _run(llm, [prompt, prompt])
    assert (cached_a, cached_b) == (0, 0)
    _assert_same_logits_in_batch(b, a)
    ((cached, _),) = _run(llm, [prompt])
    assert cached == 96  # the first request's pages were registered after the step


def test_salted_tenants_do_not_share_pages(llm):
    prompt = _tokens(10, 90)
    assert llm.reset_prefix_cache()
    _run(llm, [prompt])
    ((cached_other,), (cached_same,)) = (
        [c for c, _ in _run(llm, [prompt], salt="tenant-b")],
        [c for c, _ in _run(llm, [prompt])],
    )
    assert cached_other == 0 and cached_same == 64
    ((cached_b_again, _),) = _run(llm, [prompt], salt="tenant-b")
    assert cached_b_again == 64


def test_hit_statistics_count_admissions_hits_and_tokens(llm):
    stats = _scheduler(llm).kv_cache_manager.hit_stats

    def snapshot():
        return (stats.queries, stats.hits, stats.query_tokens, stats.hit_tokens)

    before = snapshot()
    prompt = _tokens(11, 70)
    _run(llm, [prompt])
    ((cached, _),) = _run(llm, [prompt])
    assert cached == 64
    assert tuple(a - b for a, b in zip(snapshot(), before)) == (2, 1, 140, 64)


def test_eviction_and_preemption_keep_logits_equal_to_cold_runs(tight_llm):
    """The scheduler and KV manager alone (sync and async), with vLLM's fast CPU attention: within
    BATCH_TOLERANCE. The bitwise version with all of vosti selected (backend, ops, audit) is
    tests/test_scheduler_memory_pressure_vosti.py."""
    shared = _tokens(12, 64)
    prompts = [shared + _tokens(20 + i, 150 + 10 * i) for i in range(4)]
    colds = [_cold(tight_llm, p, max_tokens=24) for p in prompts]
    sched = _scheduler(tight_llm)
    preemptions = sched.vosti_num_preemptions
    evictions = sched.kv_cache_manager.hit_stats.evictions
    assert tight_llm.reset_prefix_cache()
    warm = _run(tight_llm, prompts, max_tokens=24)
    again = _run(tight_llm, prompts[::-1], max_tokens=24)[::-1]
    assert sched.vosti_num_preemptions > preemptions, "the setup no longer forces preemption"
    assert sched.kv_cache_manager.hit_stats.evictions > evictions, "the setup no longer forces eviction"
    assert any(c > 0 for c, _ in warm + again), "no prefix hit under memory pressure"
    for (_, w), (_, a), cold in zip(warm, again, colds):
        _assert_same_logits_in_batch(w, cold)
        _assert_same_logits_in_batch(a, cold)


@pytest.fixture(scope="module")
def swa_llm(tiny_gemma3):
    engine = _make_llm(tiny_gemma3, max_model_len=512)
    yield engine
    del engine


def test_sliding_window_model_hits_equal_cold_runs(swa_llm):
    managers = _scheduler(swa_llm).kv_cache_manager.coordinator.single_type_managers
    assert {type(m).__name__ for m in managers} == {"SlidingWindowManager", "FullAttentionManager"}
    prompt = _tokens(13, 200)  # longer than the window: pages below it must stay exact too
    cold = _cold(swa_llm, prompt, 30)
    ((cached, warm),) = _run(swa_llm, [prompt], 30)
    assert cached == 192 and warm == cold
    follow_up = prompt + [tok for tok, _ in warm][:20] + _tokens(14, 30)
    cold_follow_up = _cold(swa_llm, follow_up, 8)
    _run(swa_llm, [prompt], 30)
    ((cached, warm_follow_up),) = _run(swa_llm, [follow_up], 8)
    assert cached == 224 and warm_follow_up == cold_follow_up


@pytest.fixture(scope="module")
def audited_llm(tiny_llama):
    """Audit switched on through --additional-config (not the env), vLLM's own stats logging on."""
    saved = os.environ.get("VOSTI_AUDIT")
    os.environ["VOSTI_AUDIT"] = "0"
    try:
        engine = _make_llm(tiny_llama, additional_config={"vosti": {"audit": True}}, disable_log_stats=False)
    finally:
        if saved is None:
            os.environ.pop("VOSTI_AUDIT", None)
        else:
            os.environ["VOSTI_AUDIT"] = saved
    yield engine
    del engine


def test_hits_reach_vllm_prefix_cache_metrics(audited_llm):
    def metric(name):
        return next(m.value for m in audited_llm.get_metrics() if m.name == name)

    hits, queries = metric("vllm:prefix_cache_hits"), metric("vllm:prefix_cache_queries")
    prompt = _tokens(17, 70)
    _run(audited_llm, [prompt])
    ((cached, _),) = _run(audited_llm, [prompt])
    assert cached == 64
    assert metric("vllm:prefix_cache_hits") - hits == 64
    assert metric("vllm:prefix_cache_queries") - queries == 140


def test_audit_stops_the_engine_when_a_wrong_page_would_be_reused(audited_llm, monkeypatch):
    """A fault injected into the page lookup (return another prompt's page) must stop the engine
    with KVCacheAuditError instead of producing logits. Leaves the engine dead: keep it last."""
    from vosti_plugin.kvcache.audit import KVCacheAuditError

    sched = _scheduler(audited_llm)
    assert sched.vosti_audit
    assert audited_llm.reset_prefix_cache()
    _run(audited_llm, [_tokens(15, 70)])
    cache = sched.kv_cache_manager.page_cache
    foreign = [p for p in cache.registered_pages() if cache.key(p).depth == 0 and cache.key(p).group == 0]
    assert len(foreign) == 1, "the first prompt's page 0 should be registered"
    monkeypatch.setattr(cache, "lookup", lambda *args, **kwargs: list(foreign))
    with pytest.raises(Exception) as failure:
        _run(audited_llm, [_tokens(16, 70)])
    chain, exc = [], failure.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert any(isinstance(e, KVCacheAuditError) for e in chain) or "KVCacheAuditError" in str(failure.value)
