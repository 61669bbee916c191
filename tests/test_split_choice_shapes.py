"""integration/gpu/split_choice.py times the served shapes whose decode config splits K: the list follows the rule."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from integration.gpu import split_choice  # noqa: E402
from vosti_plugin.ops import matmul  # noqa: E402


def test_the_split_shapes_are_the_served_shapes_the_rule_splits(monkeypatch):
    monkeypatch.delenv("VOSTI_DECODE_GEMM_ROWS", raising=False)
    shapes = split_choice.split_shapes()
    assert (4096, 14336) in shapes and (2560, 10240) in shapes      # Llama-3.1-8B down, Gemma-3-4B down
    assert (6144, 4096) not in shapes                                # Llama qkv: 192 column tiles, unsplit
    assert all(matmul.select_config(N, K, torch.bfloat16).split_k > 1 for N, K in shapes)
