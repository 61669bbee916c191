"""Serving a Gemma-3 multimodal checkpoint (Gemma3ForConditionalGeneration) on the CPU set-up, where vLLM's
gemma3_mm module cannot be imported (no torchvision): a vosti engine serves its text tower. Real vLLM, a
tiny checkpoint written here with the multimodal weight names (vision tower and projector included, no
lm_head: the embeddings are tied), and the same text weights as a plain Gemma3ForCausalLM checkpoint: the
raw logits of both are bitwise equal, and a launch that would take images is refused (text-only-inputs)."""
from __future__ import annotations

import gc
import importlib.util
import json
import logging
import struct

import pytest

from vosti_plugin.launch.obligations import LaunchRefused

pytestmark = pytest.mark.vllm

TEXT = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None,
    "sliding_window": 32, "layer_types": ["sliding_attention", "full_attention"],
    "query_pre_attn_scalar": 32, "hidden_activation": "gelu_pytorch_tanh",
    "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "max_position_embeddings": 4096, "tie_word_embeddings": True, "torch_dtype": "float32",
    "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
}
VISION = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
          "num_attention_heads": 2, "image_size": 28, "patch_size": 14, "vision_use_head": False}
MULTIMODAL = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {k: v for k, v in TEXT.items() if k != "architectures"}, "vision_config": VISION,
    "mm_tokens_per_image": 4, "boi_token_index": 509, "eoi_token_index": 510, "image_token_index": 511,
    "torch_dtype": "float32",
}
# Longer than the sliding window (32), so the windowed layer's tile range matters.
PROMPTS = [[5, 77, 301, 42, 9, 123, 260, 11, 400, 17, 99, 3, 250, 71, 18, 200, 33, 64, 128, 7,
            8, 8, 19, 300, 120, 121, 122, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17],
           [8, 8, 19, 300, 4]]
MAX_TOKENS = 3


def _text_weights(seed: int) -> dict:
    """fp32 Gemma-3 text weights in the text checkpoint's names (model.*; no lm_head: tied)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    h, inter, v = TEXT["hidden_size"], TEXT["intermediate_size"], TEXT["vocab_size"]
    nh, nkv, hd = TEXT["num_attention_heads"], TEXT["num_key_value_heads"], TEXT["head_dim"]

    def mat(out_f, in_f):
        return torch.randn(out_f, in_f, generator=g) / in_f**0.5

    def gain(n):   # Gemma norms scale by (1 + w)
        return 0.1 * torch.randn(n, generator=g)

    w = {"model.embed_tokens.weight": torch.randn(v, h, generator=g) / h**0.5, "model.norm.weight": gain(h)}
    for i in range(TEXT["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w |= {p + "self_attn.q_proj.weight": mat(nh * hd, h), p + "self_attn.k_proj.weight": mat(nkv * hd, h),
              p + "self_attn.v_proj.weight": mat(nkv * hd, h), p + "self_attn.o_proj.weight": mat(h, nh * hd),
              p + "self_attn.q_norm.weight": gain(hd), p + "self_attn.k_norm.weight": gain(hd),
              p + "mlp.gate_proj.weight": mat(inter, h), p + "mlp.up_proj.weight": mat(inter, h),
              p + "mlp.down_proj.weight": mat(h, inter)}
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            w[p + norm + ".weight"] = gain(h)
    return {k: t.contiguous() for k, t in w.items()}


def _vision_weights() -> dict:
    """A few vision-tower and projector tensors (names as the checkpoint has them): never served."""
    import torch

    d, patch = VISION["hidden_size"], VISION["patch_size"]
    return {"vision_tower.vision_model.embeddings.patch_embedding.weight": torch.ones(d, 3, patch, patch),
            "vision_tower.vision_model.embeddings.position_embedding.weight": torch.ones(4, d),
            "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight": torch.ones(d, d),
            "vision_tower.vision_model.post_layernorm.weight": torch.ones(d),
            "multi_modal_projector.mm_input_projection_weight": torch.ones(d, TEXT["hidden_size"]),
            "multi_modal_projector.mm_soft_emb_norm.weight": torch.ones(d)}


def _write(path, config: dict, weights: dict) -> str:
    from safetensors.torch import save_file

    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
    return str(path)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(text checkpoint, multimodal checkpoint): the same text weights. The multimodal one has the names of
    checkpoints saved before transformers 4.52 (language_model.model.*, vision_tower.*, multi_modal_projector.*)."""
    root = tmp_path_factory.mktemp("gemma3-mm")
    text = _text_weights(seed=20261207)
    multimodal = {"language_model." + k: t for k, t in text.items()} | _vision_weights()
    return _write(root / "text", TEXT, text), _write(root / "multimodal", MULTIMODAL, multimodal)


def _start(model: str, **overrides):
    from vosti_plugin.integration.engine_presets import build_llm

    return build_llm(model, skip_tokenizer_init=True, max_model_len=256, max_num_batched_tokens=64,
                     max_logprobs=20, **overrides)


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _served(model: str, then=None, **overrides) -> list:
    """Per prompt (one batch): greedy tokens and the raw logits (top 20, as float bits) of each step; then
    then(llm, params) if given."""
    from vllm import SamplingParams

    llm = _start(model, **overrides)
    try:
        params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, logprobs=20)
        prompts = [{"prompt_token_ids": p} for p in PROMPTS]
        outputs = llm.generate(prompts, params, use_tqdm=False)
        if then is not None:
            then(llm, params)
    finally:
        del llm
        gc.collect()
    return [(tuple(o.outputs[0].token_ids),
             [sorted((t, _bits(lp.logprob)) for t, lp in step.items()) for step in o.outputs[0].logprobs])
            for o in outputs]


def _mapped(name: str) -> str | None:
    """The name the text tower's loader gets for a checkpoint name (None: skipped). apply_list is on every
    vLLM vosti supports."""
    from vosti_plugin.vllm.text_tower_model import GEMMA3_TEXT_TOWER_MAPPER

    return (GEMMA3_TEXT_TOWER_MAPPER.apply_list([name]) or [None])[0]


def test_both_checkpoint_namings_map_to_the_text_model_and_skip_the_vision_tower():
    text = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight"]
    before_452 = ["language_model." + n for n in text]                           # transformers < 4.52
    after_452 = ["model.language_model." + n.removeprefix("model.") for n in text]
    assert [_mapped(n) for n in before_452] == [_mapped(n) for n in after_452] == text
    assert _mapped("language_model.lm_head.weight") == _mapped("lm_head.weight") == "lm_head.weight"
    vision = list(_vision_weights())
    assert [_mapped(n) for n in vision + ["model." + n for n in vision]] == [None] * (2 * len(vision))


def test_the_text_tower_is_registered_with_the_plugin_and_undone_with_it():
    from vllm.model_executor.models.registry import ModelRegistry

    import vosti_plugin
    from vosti_plugin import selection
    from vosti_plugin.vllm import patches
    from vosti_plugin.vllm.text_tower import TEXT_TOWER_MODELS

    (name, qualname), = TEXT_TOWER_MODELS.values()
    vosti_plugin.register()
    registered = ModelRegistry.models[name]
    assert f"{registered.module_name}:{registered.class_name}" == qualname
    selection.deactivate()
    patches.undo("plugin")
    try:
        assert name not in ModelRegistry.models
    finally:
        vosti_plugin.register()
    assert name in ModelRegistry.models


def _image_request_is_refused(llm, params):
    """The text-only launch has no image processor: vLLM refuses a request with an image."""
    from PIL import Image

    image = Image.new("RGB", (VISION["image_size"],) * 2)
    with pytest.raises(ValueError, match="text-only"):
        llm.generate([{"prompt_token_ids": [5, MULTIMODAL["image_token_index"], 7], "multi_modal_data": {"image": image}}],
                     params, use_tqdm=False)


def test_image_inputs_are_refused_at_launch_with_the_named_reason(checkpoints):
    with pytest.raises(LaunchRefused) as info:
        _start(checkpoints[1])
    message = str(info.value)
    assert "[text-only-inputs]" in message and "--language-model-only" in message, message
    assert "Gemma3ForConditionalGeneration" in message, message


@pytest.mark.slow   # two engines, a minute and a half on 2 cores
def test_text_tower_of_the_multimodal_checkpoint_serves_the_text_checkpoints_bits(checkpoints):
    from vosti_plugin.launch.log import vosti_logger

    text_dir, multimodal_dir = checkpoints
    records = []
    seen = logging.Filter()
    seen.filter = lambda record: records.append(record) or True
    vosti_logger().addFilter(seen)     # a filter: vLLM's logging set-up at engine start drops child handlers
    try:
        served = _served(multimodal_dir, then=_image_request_is_refused, language_model_only=True)
    finally:
        vosti_logger().removeFilter(seen)
    notes = [r.getMessage() for r in records if "vision tower" in r.getMessage()]
    assert _served(text_dir) == served
    assert all(len(tokens) == MAX_TOKENS for tokens, _ in served)
    if importlib.util.find_spec("torchvision") is None:
        assert len(notes) == 1 and "not served" in notes[0] and "torchvision" in notes[0], notes


@pytest.mark.parametrize("language_model_only", [True, False])
def test_a_text_only_launch_takes_the_text_tower_where_the_multimodal_module_imports(checkpoints, monkeypatch,
                                                                                   language_model_only):
    """A GPU host imports gemma3_mm, whose attention layers are built for a prefix LM (bidirectional over image
    tokens), a mask vLLM will not pair with vosti's backend: a text-only launch is served as the text tower
    there too; a launch that takes images keeps the shipped model (and text-only-inputs refuses it)."""
    from vllm.engine.arg_utils import EngineArgs

    from vosti_plugin.vllm import text_tower

    monkeypatch.setattr(text_tower, "_unimportable_module", lambda architecture: None)   # as on a GPU host
    args = EngineArgs(model=checkpoints[1], language_model_only=language_model_only)
    stand_in = text_tower.text_tower_stand_in(args)
    if not language_model_only:
        assert stand_in is None and not callable(args.hf_overrides)
        return
    assert stand_in is not None and stand_in.missing_module == "" and not stand_in.multimodal_inputs
    assert stand_in.served_as == text_tower.TEXT_TOWER_MODELS["Gemma3ForCausalLM"][0]
    assert "text only" in stand_in.note() and "bidirectional" in stand_in.serve_note()
    from transformers import AutoConfig

    built = args.hf_overrides(AutoConfig.from_pretrained(checkpoints[1]))
    assert built.architectures == [stand_in.served_as] and built.model_type == "gemma3_text"
