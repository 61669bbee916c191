"""vLLM sizes the KV cache from the memory its profiling run used; the profiling forward
(attn_metadata=None) must therefore already hold vosti's split workspace for the longest sequence."""
import pytest
import torch

from vosti_plugin.attention import backend as vosti_backend
from vosti_plugin.attention.paged_attention import split_workspace_numel

pytestmark = pytest.mark.vllm


def _impl(tiny_model_path, limit_bytes, monkeypatch):
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs

    monkeypatch.setitem(vosti_backend.SPLIT_WORKSPACE_BYTES, "cpu", limit_bytes)
    monkeypatch.setattr(vosti_backend, "_WORKSPACES", {})
    config = EngineArgs(model=tiny_model_path, attention_backend="vosti", dtype="float32", max_model_len=256,
                        max_num_batched_tokens=128, enforce_eager=True).create_engine_config()
    with set_current_vllm_config(config):
        impl = vosti_backend.VostiAttentionImpl(num_heads=4, head_size=32, scale=32 ** -0.5, num_kv_heads=2)
    return impl, config


def _profile_forward(impl, tokens=8):
    query = torch.zeros(tokens, impl.num_heads * impl.head_size)
    output = torch.empty_like(query)
    impl.forward(None, query, query, query, torch.tensor([]), None, output)
    return output


def test_profiling_forward_reserves_the_split_workspace_for_the_longest_sequence(tiny_model_path, monkeypatch):
    impl, config = _impl(tiny_model_path, 20_000, monkeypatch)
    out = _profile_forward(impl)
    assert torch.count_nonzero(out) == 0
    assert impl._path == "split" and impl._capacity >= 1
    page = config.cache_config.block_size
    segments = -(-(-(-256 // page) * page) // impl._config.segment)
    (workspace,) = vosti_backend._WORKSPACES.values()
    assert workspace.numel() == split_workspace_numel(impl._capacity, 4, 32, segments)
    assert workspace.numel() * 4 <= 20_000


def test_profiling_forward_reserves_nothing_on_the_fused_path(tiny_model_path, monkeypatch):
    impl, _ = _impl(tiny_model_path, 0, monkeypatch)
    _profile_forward(impl)
    assert impl._path == "fused" and vosti_backend._WORKSPACES == {}
