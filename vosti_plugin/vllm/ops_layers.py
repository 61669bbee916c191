"""Replacements for vLLM's dense layers (the `ops` group of vosti_plugin.vllm.patches): each maker takes
the stock attribute and returns vosti's, which calls the opaque `torch.ops.vosti.*` custom ops (they
survive torch.compile; registered by vosti_plugin.ops.torch_ops when the group is applied)."""
from __future__ import annotations

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


# sha256[:16] of ast.unparse of the stock Gemma2DecoderLayer / Gemma3DecoderLayer.forward (the same in vLLM 0.26
# and 0.32): vosti's forward replaces only a forward it was written against; any other is left stock.
GEMMA_LAYER_FORWARDS = {"5a250d30c7e08239", "edd9b6361bc6b270"}


def source_fingerprint(fn) -> str:
    import ast
    import hashlib
    import inspect
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return ""
    return hashlib.sha256(ast.unparse(ast.parse(source)).encode()).hexdigest()[:16]


def is_stock_gemma_layer(owner) -> bool:
    """Whether owner's forward is the stock Gemma decoder-layer forward vosti's replacement mirrors."""
    return source_fingerprint(owner.__dict__.get("forward")) in GEMMA_LAYER_FORWARDS


def gemma_decoder_layer_forward(stock):
    """The stock Gemma-2/3 decoder layer with its post-attention norm and its pre-feedforward residual-add norm
    in one launch (torch.ops.vosti.norm_add_rms_norm: the same bits as the two launches): the first norm's
    output feeds nothing else."""

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor, residual: torch.Tensor | None,
                **kwargs):
        post, pre = self.post_attention_layernorm, self.pre_feedforward_layernorm
        if type(post).__name__ != "GemmaRMSNorm" or type(pre).__name__ != "GemmaRMSNorm":
            return stock(self, positions, hidden_states, residual, **kwargs)
        if residual is None:
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
        else:
            hidden_states, residual = self.input_layernorm(hidden_states, residual)
        hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states, **kwargs)
        hidden_states, residual = torch.ops.vosti.norm_add_rms_norm(
            hidden_states, post.weight.data, post.variance_epsilon, residual, pre.weight.data, pre.variance_epsilon,
            True)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        return hidden_states, residual

    return forward
