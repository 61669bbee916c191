"""Real vLLM (CPU): a Gemma-2 checkpoint's attention layers soft-cap their logits. Where the launch facts miss the
cap (an architecture that passes it some other way than the model config's `attn_logit_softcapping`), the launch
check proves the configs without it, and each layer, built with the cap, refuses the launch by name instead of
launching a config nothing proved."""
import dataclasses
import gc

import pytest
import torch

pytestmark = pytest.mark.vllm

TINY = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32, intermediate_size=344,
            vocab_size=512, max_position_embeddings=2048, torch_dtype="float32", num_hidden_layers=2,
            sliding_window=16, query_pre_attn_scalar=32)


@pytest.fixture(scope="module")
def tiny_gemma2(tmp_path_factory) -> str:
    from transformers import Gemma2Config, Gemma2ForCausalLM

    config = Gemma2Config(**TINY)
    assert config.attn_logit_softcapping
    config.architectures = ["Gemma2ForCausalLM"]
    torch.manual_seed(81)
    out = tmp_path_factory.mktemp("tiny-gemma2-pins")
    Gemma2ForCausalLM(config).save_pretrained(out)
    return str(out)


def test_a_layer_whose_soft_cap_the_launch_facts_missed_refuses_the_launch(tiny_gemma2, monkeypatch):
    from vosti_plugin.integration.engine_presets import build_llm
    from vosti_plugin.vllm import launch_facts

    read = launch_facts.facts_from_vllm_config
    monkeypatch.setattr(launch_facts, "facts_from_vllm_config",
                        lambda cfg: dataclasses.replace(read(cfg), attention_soft_cap=False))
    with pytest.raises(Exception) as refused:
        llm = build_llm(tiny_gemma2, max_num_batched_tokens=64, max_model_len=256)
        del llm
    gc.collect()
    text = "".join(str(e) for e in _chain(refused.value))
    assert "USE_SOFT_CAP=True" in text and "Gemma2ForCausalLM" in text, text


def test_the_same_checkpoint_launches_with_the_facts_as_read(tiny_gemma2):
    from vllm import SamplingParams

    from vosti_plugin.integration.engine_presets import build_llm

    llm = build_llm(tiny_gemma2, max_num_batched_tokens=64, max_model_len=256)
    try:
        out = llm.generate([{"prompt_token_ids": [5, 77, 301, 42]}], SamplingParams(max_tokens=2, temperature=0),
                           use_tqdm=False)
        assert len(out[0].outputs[0].token_ids) == 2
    finally:
        del llm
        gc.collect()


def _chain(e: BaseException):
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__
