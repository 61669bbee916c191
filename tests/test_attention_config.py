"""Launch configs depend on model geometry only, cover the catalog, and refuse unsupported input clearly."""

import inspect

import pytest
import torch

from vosti_plugin.attention.config import (
    CATALOG,
    SUPPORTED_DTYPES,
    SUPPORTED_HEAD_DIMS,
    SUPPORTED_PAGE_SIZES,
    AttentionLaunchConfig,
    UnsupportedGeometry,
    select_config,
)


def test_select_config_takes_only_model_geometry():
    assert list(inspect.signature(select_config).parameters) == [
        "head_dim", "num_q_heads", "num_kv_heads", "page_size", "dtype",
    ]


def test_catalog_holds_every_supported_geometry_with_a_consistent_config():
    keys = {key for key, _ in CATALOG}
    assert len(keys) == len(CATALOG)
    for key, config in CATALOG:
        assert config.queries_per_kv == key.queries_per_kv
        assert config.group >= key.queries_per_kv and config.group & (config.group - 1) == 0
        assert config.block_m == config.block_q * config.group
        assert config.segment % config.block_n == 0
        assert config.block_m >= 16 and config.block_n >= 16 and key.head_dim >= 16  # tl.dot minimums on GPU
    for dtype in SUPPORTED_DTYPES:
        for head_dim in SUPPORTED_HEAD_DIMS:
            for page_size in SUPPORTED_PAGE_SIZES:
                assert select_config(head_dim, 32, 8, page_size, dtype) in {c for _, c in CATALOG}


@pytest.mark.parametrize(
    "geometry, dtype",
    [((128, 32, 8, 16), torch.bfloat16), ((256, 8, 4, 16), torch.bfloat16), ((128, 32, 8, 16), torch.float32),
     ((128, 24, 8, 64), torch.bfloat16),    # Llama-3.2-3B: 3 queries per KV head
     ((128, 28, 4, 64), torch.bfloat16),    # Qwen2.5-7B: 7
     ((96, 32, 32, 64), torch.bfloat16),    # Phi-3-mini: head dim 96
     ((80, 40, 8, 64), torch.bfloat16),     # head dim 80, 5 queries per KV head
     ((64, 64, 1, 64), torch.bfloat16)],    # 64 queries per KV head (MQA-style)
)
def test_production_geometries_have_configs(geometry, dtype):
    config = select_config(*geometry, dtype)
    assert config.queries_per_kv == geometry[1] // geometry[2]


@pytest.mark.parametrize(
    "geometry, dtype, message",
    [
        ((112, 32, 8, 16), torch.bfloat16, "head_dim=112"),
        ((128, 32, 8, 24), torch.bfloat16, "page_size=24"),
        ((128, 30, 8, 16), torch.bfloat16, "multiple of num_kv_heads"),
        ((128, 65, 1, 16), torch.bfloat16, "65 queries per KV head"),
        ((128, 32, 8, 16), torch.float64, "dtype"),
    ],
)
def test_unsupported_geometry_is_refused_with_the_reason(geometry, dtype, message):
    with pytest.raises(UnsupportedGeometry, match=message):
        select_config(*geometry, dtype)
    assert issubclass(UnsupportedGeometry, ValueError)


def test_config_rejects_inconsistent_tiles():
    with pytest.raises(ValueError, match="multiple of block_n"):
        AttentionLaunchConfig(block_q=2, block_m=4, block_n=16, segment=8, num_warps=4, num_stages=1)
    with pytest.raises(ValueError, match="power of two"):
        AttentionLaunchConfig(block_q=3, block_m=12, block_n=4, segment=8, num_warps=4, num_stages=1)
    with pytest.raises(ValueError, match="rounded up to a power of two"):
        AttentionLaunchConfig(block_q=2, block_m=16, block_n=4, segment=8, num_warps=4, num_stages=1, queries_per_kv=3)
