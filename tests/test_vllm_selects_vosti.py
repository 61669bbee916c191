"""Foundation: selecting vosti inside real vLLM (CPU build) runs our backend, scheduler and KV manager,
and the logits match an independent reference forward; not selecting it leaves vLLM stock."""
import gc

import pytest
import torch

from vosti_plugin import forward_counters

pytestmark = pytest.mark.vllm

# fp32 everywhere; the only differences from transformers are summation orders inside kernels.
LOGIT_ATOL = 2e-4
PROMPTS = ([5, 77, 301, 42, 9, 123, 260, 11, 400, 17, 99, 3, 250, 71, 18, 200, 33, 64, 128, 7],
           [300, 12, 12, 12, 45, 46, 47, 480, 2, 19])


def _attention_impl_names(llm) -> set[str]:
    def collect(model):
        return sorted({type(m.impl).__name__ for m in model.modules() if hasattr(m, "impl")})

    return set(sum(llm.apply_model(collect), []))


def _scheduler(llm):
    return llm.llm_engine.engine_core.engine_core.scheduler


@pytest.fixture(scope="module")
def vosti_llm(tiny_model_path):
    from vosti_plugin.integration.engine_presets import build_llm

    llm = build_llm(tiny_model_path, max_num_batched_tokens=64)
    yield llm
    del llm
    gc.collect()


def _reference_logits(model_path, token_ids):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([token_ids])).logits[0].double()


def test_vosti_backend_scheduler_and_kv_manager_run_inside_vllm(vosti_llm):
    from vllm import SamplingParams

    from vosti_plugin.vllm.kv_manager import VostiKVCacheManager
    from vosti_plugin.scheduler import VostiScheduler

    with forward_counters.counting() as calls:
        vosti_llm.generate([{"prompt_token_ids": PROMPTS[0]}], SamplingParams(max_tokens=3, temperature=0),
                           use_tqdm=False)
    assert calls["attention"] > 0 and calls["kv_write"] > 0
    assert _attention_impl_names(vosti_llm) == {"VostiAttentionImpl"}
    scheduler = _scheduler(vosti_llm)
    assert isinstance(scheduler, VostiScheduler)
    assert isinstance(scheduler.kv_cache_manager, VostiKVCacheManager)


def test_vosti_logits_match_transformers_reference(vosti_llm, tiny_model_path):
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=4, temperature=0, logprobs=20)
    outs = vosti_llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
    worst = 0.0
    for prompt, out in zip(PROMPTS, outs):
        completion = out.outputs[0]
        full = list(prompt) + list(completion.token_ids)
        ref = _reference_logits(tiny_model_path, full)
        for step, top in enumerate(completion.logprobs):
            row = ref[len(prompt) - 1 + step]
            assert completion.token_ids[step] == int(row.argmax()), "greedy token differs from the reference"
            for tid, lp in top.items():
                worst = max(worst, abs(lp.logprob - float(row[tid])))
    print(f"max |vosti - transformers| over top-20 raw logits: {worst:.3g} (tolerance {LOGIT_ATOL})")
    assert worst <= LOGIT_ATOL


def test_without_vosti_vllm_stays_stock(vosti_llm, tiny_model_path):
    from vllm import SamplingParams
    from vllm.v1.core.sched.scheduler import Scheduler

    from vosti_plugin.integration.engine_presets import build_llm
    from vosti_plugin.scheduler import VostiScheduler

    stock = build_llm(tiny_model_path, vosti=False)
    try:
        with forward_counters.counting() as calls:
            stock.generate([{"prompt_token_ids": PROMPTS[1]}], SamplingParams(max_tokens=2, temperature=0),
                           use_tqdm=False)
        assert not calls, f"stock engine reached vosti code: {dict(calls)}"
        assert "VostiAttentionImpl" not in _attention_impl_names(stock)
        assert type(_scheduler(stock)) is Scheduler and not isinstance(_scheduler(stock), VostiScheduler)
        from vosti_plugin.ops.install import is_enabled

        assert not is_enabled()
    finally:
        del stock
        gc.collect()
