"""Model geometries the harness runs: the bundled tiny Llama (real random weights) and the GPU
geometries (config.json only, loaded with load_format="dummy" and re-drawn after loading)."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vosti_plugin.integration.geometries import GEOMETRIES, shallow

LLAMA31_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 131072,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "bos_token_id": 128000, "eos_token_id": 128001,
}

# Gemma-3-4B text tower: sliding window 1024 on 5 of every 6 layers (layer_types spells it out).
GEMMA3_4B = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
    "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 262208,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "sliding_window": 1024, "sliding_window_pattern": 6,
    "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(34)],
    "query_pre_attn_scalar": 256, "hidden_activation": "gelu_pytorch_tanh",
    "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "max_position_embeddings": 131072, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
}

QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 40960,
    "attention_bias": False, "hidden_act": "silu", "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
}

# A CPU-sized Gemma-3 (sliding window 32 on 5 of 6 layers): exercises the re-draw and window paths
# through the Triton interpreter; not part of the default CPU run.
TINY_GEMMA3 = {
    **GEMMA3_4B,
    "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 6,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512,
    "sliding_window": 32, "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                          for i in range(6)],
    "query_pre_attn_scalar": 32, "max_position_embeddings": 4096, "rope_scaling": None,
    "torch_dtype": "float32",
}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    config: dict | None = None          # None: the bundled tiny model with its real weights
    gemma_norms: bool = False           # norms scale by (1 + w): re-draw sets w = 0
    description: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def dummy(self) -> bool:
        return self.config is not None

    @property
    def vocab_size(self) -> int:
        if self.config is None:
            from vosti_plugin.integration.tiny_model import GEOMETRY

            return GEOMETRY["vocab_size"]
        return self.config["vocab_size"]

    @property
    def max_positions(self) -> int:
        if self.config is None:
            from vosti_plugin.integration.tiny_model import GEOMETRY

            return GEOMETRY["max_position_embeddings"]
        return self.config["max_position_embeddings"]


MODELS: dict[str, ModelSpec] = {
    "tiny": ModelSpec("tiny", None, description="bundled tiny Llama (2 layers, vocab 512), real random weights"),
    "tiny-gemma3": ModelSpec("tiny-gemma3", TINY_GEMMA3, gemma_norms=True,
                             description="CPU-sized Gemma-3 geometry, window 32 on 5 of 6 layers, re-drawn"),
    "llama31-8b": ModelSpec("llama31-8b", LLAMA31_8B, description="Llama-3.1-8B geometry, re-drawn weights"),
    "gemma3-4b": ModelSpec("gemma3-4b", GEMMA3_4B, gemma_norms=True,
                           description="Gemma-3-4B text geometry, window 1024 on 5 of 6 layers, re-drawn"),
    "qwen3-8b": ModelSpec("qwen3-8b", QWEN3_8B, description="Qwen3-8B geometry (qk-norm), re-drawn weights"),
}
# Geometries outside the original catalog, 8 layers deep (every per-layer shape is the checkpoint's):
# GQA 3, GQA 7 with qkv bias, head dim 96, head dim 64 with tied embeddings, a small weight whose K is twice N
# (its decode GEMM splits K).
for _name, _why in (("llama32-3b", "3 queries per KV head"), ("qwen25-7b", "7 queries per KV head, qkv bias"),
                    ("phi3-mini", "head dim 96"), ("llama32-1b", "head dim 64, tied embeddings"),
                    ("qwen3-0.6b", "o projection 2048 -> 1024, split K on a small weight")):
    MODELS[f"{_name}-l8"] = ModelSpec(f"{_name}-l8", {**shallow(_name, 8), "max_position_embeddings": 32768 + 256},
                                      description=f"{_name} geometry, 8 layers ({_why}), re-drawn weights")

# The sub-2B checkpoints at their full depth (their decode steps are launch-bound: end-to-end timing, #18)
for _name in ("qwen3-0.6b", "qwen25-0.5b", "gemma3-1b"):
    _full = GEOMETRIES[_name].get("text_config", GEOMETRIES[_name])
    MODELS[_name] = ModelSpec(_name, shallow(_name, _full["num_hidden_layers"]),
                              gemma_norms=_name.startswith("gemma"),
                              description=f"{_name} geometry, every layer, re-drawn weights")


def get(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None


def materialize(spec: ModelSpec, root: Path | None = None) -> Path:
    """A directory vLLM can load: the tiny model's cache dir, or a fresh dir with config.json."""
    if spec.config is None:
        from vosti_plugin.integration.tiny_model import ensure_tiny_model

        return ensure_tiny_model()
    root = Path(root) if root else Path(tempfile.mkdtemp(prefix="vosti-harness-"))
    out = root / spec.name
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(spec.config, indent=1))
    return out
