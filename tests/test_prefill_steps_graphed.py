"""vosti captures steps up to its step budget as CUDA graphs unless the user chose capture sizes or eager mode.

An eager step of vosti's Triton launches is bound by their host time (H200, session 17: Gemma-3-4B prefill
2.3-2.8x faster with the step graphed), and vLLM's default capture size leaves every prefill chunk eager.
Real vLLM (0.32, CPU) builds the configs; its own capture-size rule then turns the value into the list of
sizes a GPU engine captures."""
import copy

import pytest
import torch

pytest.importorskip("vllm")

from vllm.config import CUDAGraphMode  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402

from vosti_plugin.ops import matmul  # noqa: E402
from vosti_plugin.selection import (COARSE_GRAPH_STRIDE, MAX_GRAPH_TOKENS, _capture_setting,  # noqa: E402
                                   graph_capture_sizes)


@pytest.fixture(scope="module")
def build(tiny_model_path):
    def _build(**kw):
        args = EngineArgs(model=tiny_model_path, dtype="float32", max_model_len=4096, **kw)
        return args, args.create_engine_config()
    return _build


def _captured_sizes(built) -> list[int]:
    """The sizes vLLM would capture on a GPU (the CPU platform turns graphs off and clears them): vLLM's own rule,
    run on a copy of the config with graphs on and the capture settings the engine arguments carried."""
    args, config = built
    gpu = copy.deepcopy(config)
    cc = gpu.compilation_config
    cc.cudagraph_mode = CUDAGraphMode.FULL_AND_PIECEWISE
    cc.cudagraph_capture_sizes = _capture_setting(args, "cudagraph_capture_sizes")
    cc.max_cudagraph_capture_size = _capture_setting(args, "max_cudagraph_capture_size")
    gpu._set_cudagraph_sizes()
    assert cc.max_cudagraph_capture_size == max(cc.cudagraph_capture_sizes)
    return cc.cudagraph_capture_sizes


@pytest.mark.parametrize("budget, expected", [(None, 2048), (512, 512), (1000, 1000), (8192, MAX_GRAPH_TOKENS),
                                              (16, 16)])
def test_vosti_graphs_steps_up_to_the_step_budget(build, budget, expected):
    kw = {} if budget is None else {"max_num_batched_tokens": budget}
    built = build(attention_backend="vosti", **kw)
    sizes = _captured_sizes(built)
    assert sizes == graph_capture_sizes(built[1].scheduler_config.max_num_batched_tokens)
    assert max(sizes) == expected             # a full prefill chunk replays a graph
    assert 1 in sizes and (expected < 256 or 256 in sizes)
    assert all(b - a <= COARSE_GRAPH_STRIDE for a, b in zip(sizes, sizes[1:]))


def _launched(M: int, config):
    """The config a 16-bit GEMM of M rows launches when `config` is its decode config: the matmul's own dispatch."""
    return matmul.launch_path(M, config, torch.bfloat16)[1]


# (N, K) of Llama-3.1-8B's qkv (unsplit) and down (split 2) projections and Qwen3-0.6B's o_proj (split 4)
_SHAPES = ((6144, 4096), (4096, 14336), (1024, 2048))


@pytest.mark.parametrize("mid", ["1", "0"])
@pytest.mark.parametrize("budget", [2048, 1000, 100])
def test_padding_a_step_to_its_capture_size_adds_no_gemm_tile(monkeypatch, mid, budget):
    monkeypatch.setenv("VOSTI_MID_GEMM", mid)
    sizes = graph_capture_sizes(budget)
    for n, k in _SHAPES:
        config = matmul.select_config(n, k, torch.bfloat16)
        for rows in range(1, budget + 1):
            padded = next(s for s in sizes if s >= rows)
            launch, padded_launch = _launched(rows, config), _launched(padded, config)
            if padded_launch == launch:   # the same path: as many row tiles
                assert -(-padded // launch.block_m) == -(-rows // launch.block_m), (n, k, rows, padded)
            else:                         # padded into the next path: only up to where that path starts
                assert _launched(padded - 1, config) == launch, (n, k, rows, padded)


def test_mid_tiles_need_fewer_sizes(monkeypatch):
    monkeypatch.delenv("VOSTI_MID_GEMM", raising=False)
    with_mid = graph_capture_sizes(2048)
    monkeypatch.setenv("VOSTI_MID_GEMM", "0")
    without = graph_capture_sizes(2048)
    assert [s for s in with_mid if s > 512] == [s for s in without if s > 512] == [*range(640, 2048, 128), 2048]
    assert len(with_mid) == 25 and len(without) == 34     # vLLM's stride of 16 up to 2048: 147


def test_stock_vllm_keeps_its_own_capture_sizes(build):
    built = build()
    assert built[0].cudagraph_capture_sizes is None and built[0].max_cudagraph_capture_size is None
    assert max(_captured_sizes(built)) <= 512


@pytest.mark.parametrize("kw, expected_max", [
    ({"max_cudagraph_capture_size": 64}, 64),
    ({"max_cudagraph_capture_size": 1024}, 1024),
    ({"compilation_config": {"max_cudagraph_capture_size": 96}}, 96),
    ({"compilation_config": {"cudagraph_capture_sizes": [1, 2, 4, 8]}}, 8),
    ({"cudagraph_capture_sizes": [1, 2, 4, 8]}, 8),
])
def test_the_users_capture_choice_is_kept(build, kw, expected_max):
    built = build(attention_backend="vosti", **kw)
    sizes = _captured_sizes(built)
    assert max(sizes) == expected_max
    if expected_max > 16:
        assert all(b - a <= 16 for a, b in zip(sizes, sizes[1:])), "vLLM's own stride, not vosti's"


def test_eager_mode_captures_nothing(build):
    args, _config = build(attention_backend="vosti", enforce_eager=True)
    assert args.cudagraph_capture_sizes is None and args.max_cudagraph_capture_size is None
