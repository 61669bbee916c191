"""Real vLLM (CPU): under vosti a Gemma-2/3 decoder layer runs its post-attention norm and its pre-feedforward
residual-add norm as one launch (torch.ops.vosti.norm_add_rms_norm), and a Gemma-3 or Qwen3 attention layer its
q and k norms as one launch (torch.ops.vosti.qk_rms_norm); the logits still match an independent reference
forward (transformers). Norm weights are drawn, so a swapped or dropped weight shows."""
import gc

import pytest
import torch

from vosti_plugin import forward_counters

pytestmark = pytest.mark.vllm

LAYERS = 3
LOGIT_ATOL = 2e-4
PROMPTS = ([5, 77, 301, 42, 9, 123, 260, 11, 400, 17, 99, 3, 250, 71, 18, 200, 33, 64, 128, 7, 90, 91, 92],
           [300, 12, 12, 12, 45, 46, 47, 480, 2, 19])


TINY = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32, intermediate_size=344,
            vocab_size=512, max_position_embeddings=2048, torch_dtype="float32")


def _save_tiny(out, model_cls, config, seed: int, norm_mean: float) -> str:
    """A tiny checkpoint of model_cls: matrices N(0, 1/fan_in), norm weights N(norm_mean, 0.3)."""
    config.architectures = [model_cls.__name__]
    torch.manual_seed(seed)
    model = model_cls(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, p.shape[1] ** -0.5)
            else:
                p.normal_(norm_mean, 0.3)
    model.save_pretrained(out)
    return str(out)


@pytest.fixture(scope="module")
def tiny_gemma3(tmp_path_factory) -> str:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    config = Gemma3TextConfig(**TINY, num_hidden_layers=LAYERS, sliding_window=16, query_pre_attn_scalar=32,
                              layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    return _save_tiny(tmp_path_factory.mktemp("tiny-gemma3-norms"), Gemma3ForCausalLM, config, 77, 0.0)


@pytest.fixture(scope="module")
def gemma_llm(tiny_gemma3):
    from vosti_plugin.integration.engine_presets import build_llm

    llm = build_llm(tiny_gemma3, max_num_batched_tokens=64, max_model_len=512)
    yield llm
    del llm
    gc.collect()


def test_norm_pairs_run_as_one_launch(gemma_llm):
    from vllm import SamplingParams

    with forward_counters.counting() as calls:
        gemma_llm.generate([{"prompt_token_ids": PROMPTS[1]}], SamplingParams(max_tokens=3, temperature=0),
                           use_tqdm=False)
    forwards = calls["rms_norm"]
    assert forwards > 0, dict(calls)
    # per forward: one plain norm (the first layer's input norm); in each layer its q/k norms in one launch and
    # its post-attention/pre-feedforward pair in one launch; each post-feedforward norm with the next layer's
    # residual-add input norm in one launch (the last layer's with the final norm); no lone residual-add norm
    assert calls["qk_rms_norm"] == LAYERS * forwards, dict(calls)
    assert calls["norm_add_rms_norm"] == 2 * LAYERS * forwards, dict(calls)
    assert calls["fused_add_rms_norm"] == 0, dict(calls)


def _reference_logits(model_cls, model_path, token_ids):
    model = model_cls.from_pretrained(model_path, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([token_ids])).logits[0].double()


def _assert_matches_reference(llm, model_cls, model_path):
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=4, temperature=0, logprobs=20)
    outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
    worst = 0.0
    for prompt, out in zip(PROMPTS, outs):
        completion = out.outputs[0]
        ref = _reference_logits(model_cls, model_path, list(prompt) + list(completion.token_ids))
        for step, top in enumerate(completion.logprobs):
            row = ref[len(prompt) - 1 + step]
            assert completion.token_ids[step] == int(row.argmax()), "greedy token differs from the reference"
            for tid, lp in top.items():
                worst = max(worst, abs(lp.logprob - float(row[tid])))
    assert worst <= LOGIT_ATOL, f"max |vosti - transformers| over top-20 raw logits: {worst:.3g}"


def test_gemma_logits_match_transformers_reference(gemma_llm, tiny_gemma3):
    from transformers import Gemma3ForCausalLM

    _assert_matches_reference(gemma_llm, Gemma3ForCausalLM, tiny_gemma3)


def test_gemma2_layer_runs_its_norm_pair_as_one_launch_and_matches_the_reference(tmp_path_factory):
    from transformers import Gemma2Config, Gemma2ForCausalLM
    from vllm import SamplingParams

    from vosti_plugin.integration.engine_presets import build_llm

    config = Gemma2Config(**TINY, num_hidden_layers=2, sliding_window=16, query_pre_attn_scalar=32)
    out = _save_tiny(tmp_path_factory.mktemp("tiny-gemma2-norms"), Gemma2ForCausalLM, config, 79, 0.0)
    llm = build_llm(out, max_num_batched_tokens=64, max_model_len=512)
    try:
        with forward_counters.counting() as calls:
            llm.generate([{"prompt_token_ids": PROMPTS[1]}], SamplingParams(max_tokens=2, temperature=0),
                         use_tqdm=False)
        forwards = calls["rms_norm"]
        assert forwards > 0 and calls["fused_add_rms_norm"] == 0, dict(calls)
        assert calls["norm_add_rms_norm"] == 2 * 2 * forwards, dict(calls)   # 2 layers
        _assert_matches_reference(llm, Gemma2ForCausalLM, out)
    finally:
        del llm
        gc.collect()


@pytest.fixture(scope="module")
def qwen3_llm(tmp_path_factory):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from vosti_plugin.integration.engine_presets import build_llm

    config = Qwen3Config(**TINY, num_hidden_layers=LAYERS, tie_word_embeddings=False)
    out = _save_tiny(tmp_path_factory.mktemp("tiny-qwen3-norms"), Qwen3ForCausalLM, config, 78, 1.0)
    llm = build_llm(out, max_num_batched_tokens=64, max_model_len=512)
    yield llm, out
    del llm
    gc.collect()


def test_qwen3_q_and_k_norms_run_as_one_launch_and_match_the_reference(qwen3_llm):
    from transformers import Qwen3ForCausalLM
    from vllm import SamplingParams

    llm, path = qwen3_llm
    with forward_counters.counting() as calls:
        llm.generate([{"prompt_token_ids": PROMPTS[1]}], SamplingParams(max_tokens=2, temperature=0), use_tqdm=False)
    assert calls["qk_rms_norm"] > 0 and calls["rms_norm"] * LAYERS == calls["qk_rms_norm"], dict(calls)
    _assert_matches_reference(llm, Qwen3ForCausalLM, path)


def test_only_the_stock_forward_it_mirrors_is_replaced():
    """The fused forward replaces a Gemma decoder layer's forward only while that forward is the stock one it
    was written against (vLLM 0.26 and 0.32 ship the same); a changed forward stays stock."""
    from vllm.model_executor.models import gemma2, gemma3

    from vosti_plugin.vllm import ops_layers, patches

    from vllm.model_executor.models import qwen3

    for layer in (gemma2.Gemma2DecoderLayer, gemma3.Gemma3DecoderLayer):   # stock, even while vosti's is in
        assert ops_layers.source_fingerprint(patches.original(layer, "forward")) in ops_layers.GEMMA_LAYER_FORWARDS
    for model in (gemma2.Gemma2Model, gemma3.Gemma3Model):
        assert ops_layers.source_fingerprint(patches.original(model, "forward")) in ops_layers.GEMMA_MODEL_FORWARDS
    for attention in (qwen3.Qwen3Attention, gemma3.Gemma3Attention):
        assert (ops_layers.source_fingerprint(patches.original(attention, "forward"))
                in ops_layers.QK_NORM_ATTENTION_FORWARDS)

    class Changed(gemma3.Gemma3DecoderLayer):
        def forward(self, positions, hidden_states, residual, **kwargs):
            return hidden_states, residual

    class ChangedModel(gemma3.Gemma3Model):
        def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None, **kwargs):
            return inputs_embeds

    assert not ops_layers.is_stock_gemma_layer(Changed)
    assert not ops_layers.is_stock_qk_norm_attention(Changed)
    assert not ops_layers.is_stock_gemma_model(ChangedModel)
    mirrored = [p for p in patches.inventory() if p.attribute == "forward" and ":" in p.owner
                and p.owner.split(".")[3].startswith(("gemma", "qwen"))]
    assert {p.owner.rsplit(":", 1)[1] for p in mirrored} == {"Gemma2DecoderLayer", "Gemma3DecoderLayer",
                                                            "Gemma2Model", "Gemma3Model",
                                                            "Qwen3Attention", "Gemma3Attention"}
