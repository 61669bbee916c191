"""The bundled tiny Llama: small enough for CPU vLLM, real enough to make determinism tests see context.

Built offline at first use in a cache directory: a byte-level BPE tokenizer trained with `tokenizers`
on a small embedded corpus, and seeded random weights (matrices N(0, 1/fan_in), norm gains 1, so the
logits depend on the whole context — vLLM's dummy U(-1e-3, 1e-3) weights would make tests blind).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

GEOMETRY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
SEED = 20261129
VERSION = "v1"
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]

_CORPUS = """\
Determinism means the same request gets the same logits whatever else the server is doing.
A paged attention kernel visits key and value tiles in a fixed order from position zero.
The prefix cache may reuse a page only when its tokens, its depth and its parent page are equal.
Batch invariance: each output row is computed by the same arithmetic at any batch size.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
In the beginning the engine scheduled one request, then many; the answers did not change.
Reinforcement learning teams compare rollout log-probabilities with the trainer, bit for bit.
Audit pipelines replay an evaluation a year later and expect identical numbers.
0 1 2 3 4 5 6 7 8 9 10 100 1000 + - * / = ( ) [ ] { } < > , . ; : ! ? ' " # $ % & @
"""


def cache_root() -> Path:
    return Path(os.environ.get("VOSTI_CACHE_DIR", Path.home() / ".cache" / "vosti"))


def model_dir() -> Path:
    return cache_root() / "models" / f"tiny-llama-{VERSION}"


def _train_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=GEOMETRY["vocab_size"],
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "model_max_length": GEOMETRY["max_position_embeddings"],
        "add_bos_token": True,
    }, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}, indent=2))


def random_llama_weights(geometry: dict, seed: int, device: str = "cpu") -> dict:
    """fp32 Llama weights in HF checkpoint names (another device draws other numbers, same law)."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    h, inter, v = geometry["hidden_size"], geometry["intermediate_size"], geometry["vocab_size"]
    nh, nkv = geometry["num_attention_heads"], geometry["num_key_value_heads"]
    hd = geometry.get("head_dim", h // nh)

    def mat(out_f, in_f):
        return torch.randn(out_f, in_f, generator=g, device=device) / in_f**0.5

    def ones(n):
        return torch.ones(n, device=device)

    w = {"model.embed_tokens.weight": torch.randn(v, h, generator=g, device=device),
         "model.norm.weight": ones(h),
         "lm_head.weight": mat(v, h)}
    for i in range(geometry["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = mat(nh * hd, h)
        w[p + "self_attn.k_proj.weight"] = mat(nkv * hd, h)
        w[p + "self_attn.v_proj.weight"] = mat(nkv * hd, h)
        w[p + "self_attn.o_proj.weight"] = mat(h, nh * hd)
        w[p + "mlp.gate_proj.weight"] = mat(inter, h)
        w[p + "mlp.up_proj.weight"] = mat(inter, h)
        w[p + "mlp.down_proj.weight"] = mat(h, inter)
        w[p + "input_layernorm.weight"] = ones(h)
        w[p + "post_attention_layernorm.weight"] = ones(h)
    return {k: t.contiguous() for k, t in w.items()}


def ensure_tiny_model(path: str | os.PathLike | None = None) -> Path:
    """Create the bundled model if missing (atomic: built in a temp dir, then renamed); return its path."""
    from safetensors.torch import save_file

    out = Path(path) if path else model_dir()
    if (out / "model.safetensors").exists() and (out / "tokenizer.json").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(GEOMETRY, indent=2))
    (tmp / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}, indent=2))
    _train_tokenizer(tmp)
    save_file(random_llama_weights(GEOMETRY, SEED), str(tmp / "model.safetensors"), metadata={"format": "pt"})
    try:
        tmp.rename(out)
    except OSError:  # another process won the race
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out
