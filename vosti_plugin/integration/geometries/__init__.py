"""Real decoder geometries people serve (config.json fields only; weights are generated). Used by the
launch-check table (`python -m vosti_plugin.integration.geometries.table`) and the GPU harness's new-geometry models.
Sizes are the published checkpoints' config.json values."""
from __future__ import annotations

_LLAMA_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
_LLAMA32_ROPE = {**_LLAMA_ROPE, "factor": 32.0}


def _llama(hidden, inter, layers, heads, kv, head_dim, vocab, tie, rope=_LLAMA_ROPE, arch="LlamaForCausalLM",
           model_type="llama", theta=500000.0, **extra):
    return {"architectures": [arch], "model_type": model_type, "hidden_size": hidden, "intermediate_size": inter,
            "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
            "head_dim": head_dim, "vocab_size": vocab, "rms_norm_eps": 1e-5, "rope_theta": theta,
            "max_position_embeddings": 131072, "rope_scaling": rope, "hidden_act": "silu",
            "tie_word_embeddings": tie, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2, **extra}


def _qwen2(hidden, inter, layers, heads, kv, vocab, tie):
    return _llama(hidden, inter, layers, heads, kv, hidden // heads, vocab, tie, rope=None, arch="Qwen2ForCausalLM",
                  model_type="qwen2", theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=32768,
                  use_sliding_window=False, sliding_window=None)


def _qwen3(hidden, inter, layers, heads, kv, vocab, tie):
    return _llama(hidden, inter, layers, heads, kv, 128, vocab, tie, rope=None, arch="Qwen3ForCausalLM",
                  model_type="qwen3", theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=40960,
                  attention_bias=False)


def _gemma2(hidden, inter, layers, heads, kv, window=4096):
    return {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv, "head_dim": 256, "vocab_size": 256000, "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0, "sliding_window": window, "query_pre_attn_scalar": 256,
            "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
            "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
            "tie_word_embeddings": True, "torch_dtype": "bfloat16", "bos_token_id": 2, "eos_token_id": 1,
            "pad_token_id": 0}


def _gemma3_text(hidden, inter, layers, heads, kv, vocab, window):
    return {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv, "head_dim": 256, "vocab_size": vocab, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": window,
            "sliding_window_pattern": 6,
            "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(layers)],
            "query_pre_attn_scalar": 256, "hidden_activation": "gelu_pytorch_tanh",
            "final_logit_softcapping": None, "attn_logit_softcapping": None, "max_position_embeddings": 131072,
            "tie_word_embeddings": True, "torch_dtype": "bfloat16", "bos_token_id": 2, "eos_token_id": 1,
            "pad_token_id": 0}


def _gemma3_multimodal(text: dict) -> dict:
    """How Gemma-3 4B/12B/27B ship: the text tower inside a Gemma3ForConditionalGeneration config."""
    vision = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
              "num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 896, "patch_size": 14,
              "vision_use_head": False}
    return {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "text_config": text, "vision_config": vision, "mm_tokens_per_image": 256,
            "boi_token_index": 255999, "eoi_token_index": 256000, "image_token_index": 262144,
            "torch_dtype": "bfloat16"}


GEOMETRIES: dict[str, dict] = {
    "llama32-1b": _llama(2048, 8192, 16, 32, 8, 64, 128256, True, rope=_LLAMA32_ROPE),
    "llama32-3b": _llama(3072, 8192, 28, 24, 8, 128, 128256, True, rope=_LLAMA32_ROPE),
    "llama31-8b": _llama(4096, 14336, 32, 32, 8, 128, 128256, False),
    "llama31-70b-layers": _llama(8192, 28672, 2, 64, 8, 128, 128256, False),   # 70B's layer shapes, 2 layers
    "mistral-7b-v0.3": _llama(4096, 14336, 32, 32, 8, 128, 32768, False, rope=None, arch="MistralForCausalLM",
                              model_type="mistral", theta=1000000.0, sliding_window=None),
    "qwen25-0.5b": _qwen2(896, 4864, 24, 14, 2, 151936, True),
    "qwen25-7b": _qwen2(3584, 18944, 28, 28, 4, 152064, False),
    "qwen25-14b": _qwen2(5120, 13824, 48, 40, 8, 152064, False),
    "qwen3-0.6b": _qwen3(1024, 3072, 28, 16, 8, 151936, True),
    "qwen3-4b": _qwen3(2560, 9728, 36, 32, 8, 151936, True),
    "qwen3-8b": _qwen3(4096, 12288, 36, 32, 8, 151936, False),
    "qwen3-14b": _qwen3(5120, 17408, 40, 40, 8, 151936, False),
    "gemma2-2b": _gemma2(2304, 9216, 26, 8, 4),
    "gemma2-9b": _gemma2(3584, 14336, 42, 16, 8),
    "gemma3-1b": _gemma3_text(1152, 6912, 26, 4, 1, 262144, 512),
    "gemma3-4b": _gemma3_multimodal(_gemma3_text(2560, 10240, 34, 8, 4, 262208, 1024)),
    "gemma3-12b": _gemma3_multimodal(_gemma3_text(3840, 15360, 48, 16, 8, 262208, 1024)),
    "phi3-mini": _llama(3072, 8192, 32, 32, 32, 96, 32064, False, rope=None, arch="Phi3ForCausalLM",
                        model_type="phi3", theta=10000.0, max_position_embeddings=4096, sliding_window=None),
    "smollm2-1.7b": _llama(2048, 8192, 24, 32, 32, 64, 49152, True, rope=None, theta=130000.0,
                           max_position_embeddings=8192),
}


def shallow(name: str, layers: int) -> dict:
    """The geometry with fewer layers: every per-layer shape is the checkpoint's (for GPU determinism runs)."""
    config = dict(GEOMETRIES[name])
    if "text_config" in config:
        config = dict(config["text_config"])
    config["num_hidden_layers"] = layers
    if "layer_types" in config:
        config["layer_types"] = config["layer_types"][:layers]
    return config
