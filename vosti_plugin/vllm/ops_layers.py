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
