"""vosti's sampler overrides go in and come out again (no engine), and the per-request refusal is a
ValueError and vLLM's validation error (HTTP 400) that names the parameter."""
from __future__ import annotations

import pytest

pytest.importorskip("vllm")


def _stock_attributes():
    from vosti_plugin.vllm import compat

    attrs = {}
    for module in compat.importable_modules(compat.TOP_K_TOP_P_MODULES + compat.LOGPROB_TOPK_MODULES):
        for name in ("apply_top_k_top_p", "torch"):
            if name in vars(module):
                attrs[(module.__name__, name)] = vars(module)[name]
    for cls, name in ((compat.topk_topp_sampler_class(), "__init__"),
                      (compat.v1_model_runner_class(), "_bookkeeping_sync"),
                      (compat.input_processor_class(), "_validate_params")):
        attrs[(cls.__qualname__, name)] = vars(cls).get(name)
    return attrs


def test_install_then_uninstall_restores_every_stock_attribute():
    from vosti_plugin import sampling
    from vosti_plugin.sampling import rowwise

    before = _stock_attributes()
    with sampling.installed():
        assert sampling.is_installed()
        from vllm.v1.sample.ops import topk_topp_sampler

        assert topk_topp_sampler.apply_top_k_top_p is rowwise.apply_top_k_top_p
        during = _stock_attributes()
        changed = {key for key in before if before[key] is not during[key]}
        assert ("vllm.v1.sample.ops.topk_topp_sampler", "apply_top_k_top_p") in changed
        assert ("vllm.v1.sample.sampler", "torch") in changed
        assert {("TopKTopPSampler", "__init__"), ("GPUModelRunner", "_bookkeeping_sync"),
                ("InputProcessor", "_validate_params")} <= changed
    assert not sampling.is_installed()
    after = _stock_attributes()
    assert all(after[key] is before[key] for key in before)


def test_sampler_built_while_installed_uses_vosti_forward():
    from vosti_plugin import sampling
    from vosti_plugin.vllm import sampling_patches as vosti_install

    with sampling.installed():
        from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler

        sampler = TopKTopPSampler("raw_logprobs")
        assert sampler.forward.__func__ is vosti_install.vosti_sampler_forward
    assert TopKTopPSampler("raw_logprobs").forward.__func__ is not vosti_install.vosti_sampler_forward


@pytest.mark.parametrize("parameter, value", [("thinking_token_budget", 8), ("watermarking", True),
                                              ("logprob_token_ids", [3, 4]), ("prompt_logprob_token_ids", "array")])
def test_refusal_is_a_value_error_naming_the_parameter(parameter, value):
    if value == "array":
        import numpy as np

        value = np.array([[5, 6]])
    from vllm.sampling_params import SamplingParams

    from vosti_plugin.vllm import compat
    from vosti_plugin.sampling import refusals

    if parameter not in SamplingParams.__struct_fields__:
        pytest.skip(f"this vLLM has no {parameter}")
    params = SamplingParams(temperature=0.7, seed=1, **{parameter: value})
    with pytest.raises(refusals.SamplingRefused) as refused:
        refusals.check(params)
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, compat.validation_error_base())
    assert f"'{parameter}'" in str(refused.value) and refused.value.refusal.parameter == parameter


def test_served_parameters_pass(monkeypatch):
    from vllm.sampling_params import SamplingParams

    from vosti_plugin.sampling import refusals

    monkeypatch.delenv(refusals.REFUSE_UNSEEDED_ENV, raising=False)
    for kw in (dict(temperature=0.9, top_k=5, top_p=0.8, min_p=0.1, seed=3, logprobs=5, prompt_logprobs=2),
               dict(temperature=0.0, repetition_penalty=1.2, presence_penalty=0.3, frequency_penalty=0.3),
               dict(temperature=0.8, seed=4, n=3, logit_bias={3: 1.0}, allowed_token_ids=[3, 4, 5], min_tokens=2),
               dict(temperature=0.8), dict(temperature=0.8, watermarking=False)):
        kw = {k: v for k, v in kw.items() if k in SamplingParams.__struct_fields__}
        assert refusals.refusals(SamplingParams(**kw)) == []
    monkeypatch.setenv(refusals.REFUSE_UNSEEDED_ENV, "1")
    assert [r.parameter for r in refusals.refusals(SamplingParams(temperature=0.8))] == ["seed"]
    assert refusals.refusals(SamplingParams(temperature=0.0)) == []


@pytest.mark.parametrize("mode", ["raw_logprobs", "raw_logits", "processed_logits", "processed_logprobs"])
def test_vosti_sampler_forward_row_alone_equals_row_in_batch(mode):
    """vosti's TopKTopPSampler.forward in every logprobs mode: tokens and processed logits/logprobs of
    a seeded row are bitwise the same alone and in a batch mixing top-k, top-p, both and neither."""
    import torch

    from vosti_plugin import sampling

    vocab, rows = 97, 7
    logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(1)) * 3
    k = torch.tensor([5, vocab, 20, vocab, 1, 50, vocab], dtype=torch.int32)
    p = torch.tensor([1.0, 0.8, 0.9, 1.0, 1.0, 0.5, 1.0])

    def gens(idx):
        return {j: torch.Generator().manual_seed(100 + i) for j, i in enumerate(idx)}

    with sampling.installed():
        from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler

        sampler = TopKTopPSampler(mode)
        batch_tokens, batch_out = sampler(logits.clone(), gens(range(rows)), k, p)
        for r in range(rows):
            tok, out = sampler(logits[r : r + 1].clone(), gens([r]), k[r : r + 1], p[r : r + 1])
            assert tok.item() == batch_tokens[r].item(), (mode, r)
            if batch_out is not None:
                assert torch.equal(out[0].view(torch.int32), batch_out[r].view(torch.int32)), (mode, r)
        again, _ = sampler(logits.clone(), gens(range(rows)), k, p)
        assert torch.equal(again, batch_tokens)
