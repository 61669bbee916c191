"""The graph-step bound of the attention backend against real vLLM's CUDA-graph dispatcher.

vosti's split attention path must run a step that a CUDA graph replays as one launch, so the backend sizes
its workspace for the largest such step (`graph_attention_tokens`). With full graphs of uniform decode only
(vosti's UNIFORM_SINGLE_TOKEN_DECODE support), vLLM captures full graphs up to max_num_seqs tokens whatever the
capture size; piecewise graphs (up to the capture size) run attention eagerly. The bound is checked here
against the FULL keys vLLM's own dispatcher creates (vLLM 0.32 on this machine; 0.26 has the same code in
CudagraphDispatcher.initialize_cudagraph_keys)."""
import pytest

pytest.importorskip("vllm")

from vllm.config import CompilationConfig, CUDAGraphMode, SchedulerConfig, VllmConfig  # noqa: E402
from vllm.config.compilation import CompilationMode  # noqa: E402
from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher  # noqa: E402

from vosti_plugin.vllm.attention_backend import graph_attention_tokens  # noqa: E402

SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64, 72, 96, 128, 256, 512, 1024, 2048]


def _full_graph_tokens(mode: CUDAGraphMode, max_num_seqs: int, capture: int) -> int:
    """The largest step vLLM's dispatcher would replay as a full graph (attention inside)."""
    vc = VllmConfig(scheduler_config=SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=2048,
                                                     max_model_len=20000, is_encoder_decoder=False))
    cc = vc.compilation_config
    cc.mode = CompilationMode.VLLM_COMPILE
    cc.splitting_ops = list(CompilationConfig._attention_ops)
    cc.cudagraph_mode = mode
    cc.cudagraph_capture_sizes = [s for s in SIZES if s <= capture]
    cc.max_cudagraph_capture_size = capture
    dispatcher = CudagraphDispatcher(vc)
    dispatcher.initialize_cudagraph_keys(mode, 1)
    return max((k.num_tokens for k in dispatcher.cudagraph_keys[CUDAGraphMode.FULL]), default=0)


@pytest.mark.parametrize("mode", [CUDAGraphMode.FULL_AND_PIECEWISE, CUDAGraphMode.FULL_DECODE_ONLY])
@pytest.mark.parametrize("max_num_seqs, capture", [(64, 128), (64, 2048), (256, 512), (16, 16), (100, 2048),
                                                   (512, 256)])
def test_bound_covers_every_full_graph_vllm_captures_and_no_more(mode, max_num_seqs, capture):
    bound = graph_attention_tokens(mode, eager=False, capture=capture, max_num_seqs=max_num_seqs,
                                   max_num_tokens=2048)
    largest = _full_graph_tokens(mode, max_num_seqs, capture)
    assert largest <= bound
    # tight: a capture size at or below both limits is the bound (SIZES has one at each limit used above)
    assert bound == min(max_num_seqs, capture)
    assert largest == max(s for s in SIZES if s <= bound)


def test_piecewise_graphs_hold_no_attention_but_keep_the_capture_bound():
    assert _full_graph_tokens(CUDAGraphMode.PIECEWISE, 64, 2048) == 0
    assert graph_attention_tokens(CUDAGraphMode.PIECEWISE, eager=False, capture=2048, max_num_seqs=64,
                                  max_num_tokens=2048) == 2048


def test_no_graphs_need_one_token_and_the_step_budget_caps_the_bound():
    for mode in (CUDAGraphMode.NONE, None):
        assert graph_attention_tokens(mode, eager=False, capture=512, max_num_seqs=256, max_num_tokens=2048) == 1
    assert graph_attention_tokens(CUDAGraphMode.FULL_AND_PIECEWISE, eager=True, capture=512, max_num_seqs=256,
                                  max_num_tokens=2048) == 1
    assert graph_attention_tokens(CUDAGraphMode.FULL_AND_PIECEWISE, eager=False, capture=512, max_num_seqs=256,
                                  max_num_tokens=128) == 128
    # speculative decoding: each request's decode step holds 1 + k tokens
    assert graph_attention_tokens(CUDAGraphMode.FULL_AND_PIECEWISE, eager=False, capture=2048, max_num_seqs=64,
                                  max_num_tokens=2048, decode_query_len=3) == 192
