"""vosti captures steps up to its step budget as CUDA graphs unless the user chose capture sizes or eager mode.

An eager step of vosti's Triton launches is bound by their host time (H200, session 17: Gemma-3-4B prefill
2.3-2.8x faster with the step graphed), and vLLM's default capture size leaves every prefill chunk eager.
Real vLLM (0.32, CPU) builds the configs; its own capture-size rule then turns the value into the list of
sizes a GPU engine captures."""
import copy

import pytest

pytest.importorskip("vllm")

from vllm.config import CUDAGraphMode  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402

from vosti_plugin.selection import MAX_GRAPH_TOKENS  # noqa: E402


@pytest.fixture(scope="module")
def build(tiny_model_path):
    def _build(**kw):
        args = EngineArgs(model=tiny_model_path, dtype="float32", max_model_len=4096, **kw)
        return args.create_engine_config()
    return _build


def _captured_sizes(config) -> list[int]:
    """The sizes vLLM would capture on a GPU (the CPU platform turns graphs off): vLLM's own rule, run on a copy
    of the config with graphs on."""
    gpu = copy.deepcopy(config)
    gpu.compilation_config.cudagraph_mode = CUDAGraphMode.FULL_AND_PIECEWISE
    gpu.compilation_config.cudagraph_capture_sizes = None
    gpu._set_cudagraph_sizes()
    return gpu.compilation_config.cudagraph_capture_sizes


@pytest.mark.parametrize("budget, expected", [(None, 2048), (512, 512), (1000, 1000), (8192, MAX_GRAPH_TOKENS)])
def test_vosti_graphs_steps_up_to_the_step_budget(build, budget, expected):
    kw = {} if budget is None else {"max_num_batched_tokens": budget}
    config = build(attention_backend="vosti", **kw)
    assert config.compilation_config.max_cudagraph_capture_size == expected
    sizes = _captured_sizes(config)
    assert max(sizes) == expected             # a full prefill chunk replays a graph
    assert 1 in sizes and 256 in sizes        # decode sizes as vLLM's default


def test_stock_vllm_keeps_its_own_capture_size(build):
    config = build()
    assert config.compilation_config.max_cudagraph_capture_size is None
    assert max(_captured_sizes(config)) <= 512


@pytest.mark.parametrize("kw, expected_max", [
    ({"max_cudagraph_capture_size": 64}, 64),
    ({"compilation_config": {"max_cudagraph_capture_size": 96}}, 96),
    ({"compilation_config": {"cudagraph_capture_sizes": [1, 2, 4, 8]}}, None),
    ({"cudagraph_capture_sizes": [1, 2, 4, 8]}, None),
    ({"enforce_eager": True}, None),
])
def test_the_users_capture_choice_or_eager_mode_is_kept(build, kw, expected_max):
    config = build(attention_backend="vosti", **kw)
    assert config.compilation_config.max_cudagraph_capture_size == expected_max
