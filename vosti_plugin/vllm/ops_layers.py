"""Replacements for vLLM's dense layers (the `ops` group of vosti_plugin.vllm.patches): each maker takes
the stock attribute and returns vosti's, which calls the opaque `torch.ops.vosti.*` custom ops (they
survive torch.compile; registered by vosti_plugin.ops.torch_ops when the group is applied)."""
from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
import textwrap

import torch


def linear_apply(stock):
    return _linear


def _linear(self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return torch.ops.vosti.linear(x, layer.weight, bias)


def keep_plain_weight(stock):
    """On CPU vLLM packs linear weights for oneDNN / sgl kernels and drops layer.weight; keep the plain
    weight instead and give the stock apply a plain fallback so `disable()` still leaves a working layer."""

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        weight = getattr(layer, "weight", None)
        if isinstance(weight, torch.Tensor) and weight.device.type == "cpu" and weight.dim() == 2:
            layer.cpu_linear = torch.nn.functional.linear
            return None
        return stock(self, layer)

    return process_weights_after_loading


def rms_norm_forward(stock):
    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        if getattr(self, "variance_size_override", None) is not None:
            return stock(self, x, residual)
        weight = self.weight.data if getattr(self, "has_weight", True) else None
        if residual is None:
            return torch.ops.vosti.rms_norm(x, weight, self.variance_epsilon, False)
        return torch.ops.vosti.fused_add_rms_norm(x, residual, weight, self.variance_epsilon, False)

    return forward


def gemma_rms_norm_forward(stock):
    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        if residual is None:
            return torch.ops.vosti.rms_norm(x, self.weight.data, self.variance_epsilon, True)
        return torch.ops.vosti.fused_add_rms_norm(x, residual, self.weight.data, self.variance_epsilon, True)

    return forward


def silu_and_mul_forward(stock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.vosti.act_and_mul(x, "silu")

    return forward


def gelu_and_mul_forward(stock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if getattr(self, "approximate", "none") != "tanh":
            return stock(self, x)
        return torch.ops.vosti.act_and_mul(x, "gelu_tanh")

    return forward


# sha256[:16] of ast.unparse of the stock forwards vosti's replacements mirror (each the same in vLLM 0.26 and
# 0.32): a replacement goes only over the forward it was written against; any other is left stock.
GEMMA_LAYER_FORWARDS = {"5a250d30c7e08239", "edd9b6361bc6b270"}   # Gemma2DecoderLayer, Gemma3DecoderLayer
# Gemma2Model (0.26 and 0.32), Gemma3Model 0.32 and 0.26 (they differ only in a default argument)
GEMMA_MODEL_FORWARDS = {"ef4d876a20737200", "9bf47dab75adc0cb", "014b003b2dc5e2b9"}
QK_NORM_ATTENTION_FORWARDS = {"4f8ff102c0ac33f3", "0a47b0e2aca78359"}   # Qwen3Attention, Gemma3Attention


def source_fingerprint(fn) -> str:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return ""
    return hashlib.sha256(ast.unparse(ast.parse(source)).encode()).hexdigest()[:16]


def is_stock_gemma_layer(owner) -> bool:
    """Whether owner's forward is the stock Gemma decoder-layer forward vosti's replacement mirrors."""
    return source_fingerprint(owner.__dict__.get("forward")) in GEMMA_LAYER_FORWARDS


def is_stock_gemma_model(owner) -> bool:
    """Whether owner's forward is the stock Gemma-2/3 model forward vosti's replacement mirrors."""
    return source_fingerprint(owner.__dict__.get("forward")) in GEMMA_MODEL_FORWARDS


def is_stock_qk_norm_attention(owner) -> bool:
    """Whether owner's forward is the stock Qwen3 / Gemma-3 attention forward vosti's replacement mirrors."""
    return source_fingerprint(owner.__dict__.get("forward")) in QK_NORM_ATTENTION_FORWARDS


def _norm_weight(norm) -> tuple[torch.Tensor, float, bool] | None:
    """(weight, eps, gemma) of a stock q/k norm vosti's kernel computes as vLLM does, else None."""
    kind = type(norm).__name__
    if kind == "GemmaRMSNorm":
        return norm.weight.data, norm.variance_epsilon, True
    plain = getattr(norm, "has_weight", True) and getattr(norm, "variance_size_override", None) is None
    if kind == "RMSNorm" and plain:
        return norm.weight.data, norm.variance_epsilon, False
    return None


def qk_norm_attention_forward(stock):
    """The stock Qwen3 / Gemma-3 attention with its q and k norms in one launch (torch.ops.vosti.qk_rms_norm:
    the q and k heads of the qkv output read in place, each head its own norm's weight; the same bits as the
    two launches)."""

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
        q_norm, k_norm = _norm_weight(self.q_norm), _norm_weight(self.k_norm)
        if q_norm is None or k_norm is None or q_norm[1:] != k_norm[1:]:
            return stock(self, positions, hidden_states, **kwargs)
        qkv, _ = self.qkv_proj(hidden_states)
        qk_size = self.q_size + self.kv_size
        heads = qkv[..., :qk_size].unflatten(-1, (self.num_heads + self.num_kv_heads, self.head_dim))
        normed = torch.ops.vosti.qk_rms_norm(heads, q_norm[0], k_norm[0], self.num_heads, q_norm[1], q_norm[2])
        q = normed[..., : self.num_heads, :].flatten(-2)
        k = normed[..., self.num_heads :, :].flatten(-2)
        q, k = self.rotary_emb(positions, q, k)
        output, _ = self.o_proj(self.attn(q, k, qkv[..., qk_size:]))
        return output

    return forward


def _gemma_norms(*norms) -> bool:
    return all(type(n).__name__ == "GemmaRMSNorm" for n in norms)


def _norm_then_add_norm(x: torch.Tensor, first, residual: torch.Tensor, second):
    """first(x), then second's residual add and norm, in one launch (torch.ops.vosti.norm_add_rms_norm: the same
    bits as the two launches); (normed, residual)."""
    return torch.ops.vosti.norm_add_rms_norm(x, first.weight.data, first.variance_epsilon, residual,
                                             second.weight.data, second.variance_epsilon, True)


def _gemma_layer_before_post_norm(layer, positions: torch.Tensor, hidden_states: torch.Tensor,
                                  residual: torch.Tensor | None, pending, kwargs: dict):
    """The stock Gemma-2/3 decoder layer up to its post-feedforward norm: (mlp output, residual). `pending` is
    the previous layer's post-feedforward norm when it was left for this layer's input norm to run with."""
    if residual is None:
        residual = hidden_states
        hidden_states = layer.input_layernorm(hidden_states)
    elif pending is None:
        hidden_states, residual = layer.input_layernorm(hidden_states, residual)
    else:
        hidden_states, residual = _norm_then_add_norm(hidden_states, pending, residual, layer.input_layernorm)
    hidden_states = layer.self_attn(positions=positions, hidden_states=hidden_states, **kwargs)
    hidden_states, residual = _norm_then_add_norm(hidden_states, layer.post_attention_layernorm, residual,
                                                  layer.pre_feedforward_layernorm)
    return layer.mlp(hidden_states), residual


def gemma_decoder_layer_forward(stock):
    """The stock Gemma-2/3 decoder layer with its post-attention norm and its pre-feedforward residual-add norm
    in one launch: the first norm's output feeds nothing else."""

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor, residual: torch.Tensor | None,
                **kwargs):
        if not _gemma_norms(self.post_attention_layernorm, self.pre_feedforward_layernorm):
            return stock(self, positions, hidden_states, residual, **kwargs)
        hidden_states, residual = _gemma_layer_before_post_norm(self, positions, hidden_states, residual, None,
                                                                kwargs)
        return self.post_feedforward_layernorm(hidden_states), residual

    forward.vosti_gemma_layer = True
    return forward


def _runs_vosti_gemma_layer(layer) -> bool:
    return getattr(type(layer).forward, "vosti_gemma_layer", False) and _gemma_norms(
        layer.input_layernorm, layer.post_attention_layernorm, layer.pre_feedforward_layernorm,
        layer.post_feedforward_layernorm)


def gemma_model_forward(stock):
    """The stock Gemma-2/3 model forward, with each layer's post-feedforward norm run in one launch with the next
    layer's residual-add input norm (the last layer's with the final norm): the norm's output feeds only that
    residual add, so the bits are the two launches' and a layer's launches drop by one."""

    get_pp_group, intermediate = stock.__globals__["get_pp_group"], stock.__globals__["IntermediateTensors"]

    def forward(self, input_ids: torch.Tensor | None, positions: torch.Tensor, intermediate_tensors=None,
                inputs_embeds: torch.Tensor | None = None, **kwargs):
        layers = list(itertools.islice(self.layers, self.start_layer, self.end_layer))
        if not layers or not all(_runs_vosti_gemma_layer(layer) for layer in layers):
            return stock(self, input_ids, positions, intermediate_tensors, inputs_embeds, **kwargs)
        pp = get_pp_group()
        if pp.is_first_rank:
            hidden_states = inputs_embeds if inputs_embeds is not None else self.embed_input_ids(input_ids)
            residual = None
        else:
            hidden_states = intermediate_tensors["hidden_states"]
            residual = intermediate_tensors["residual"]
        pending = None
        for layer in layers:
            hidden_states, residual = _gemma_layer_before_post_norm(layer, positions, hidden_states, residual,
                                                                    pending, kwargs)
            pending = layer.post_feedforward_layernorm
        if not pp.is_last_rank:
            return intermediate({"hidden_states": pending(hidden_states), "residual": residual})
        if not _gemma_norms(self.norm):
            hidden_states, _ = self.norm(pending(hidden_states), residual)
            return hidden_states
        hidden_states, _ = _norm_then_add_norm(hidden_states, pending, residual, self.norm)
        return hidden_states

    return forward
