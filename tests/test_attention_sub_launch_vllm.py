"""Inside real vLLM (CPU): with a split workspace too small for a step, vosti runs the step as several
launches, and a request's raw logits are still bitwise the same alone and batched, and match an
independent reference forward."""
import gc

import pytest

from vosti_plugin import forward_counters
from vosti_plugin.attention import backend as vosti_backend

from tests.reference_forward import assert_first_step_matches_reference, raw_logits

pytestmark = pytest.mark.vllm

LIMIT_BYTES = 20_000
PROMPTS = ([(i * 37 + 11) % 500 + 3 for i in range(61)], [(i * 53 + 5) % 500 + 3 for i in range(45)])


@pytest.fixture(scope="module")
def small_workspace_llm(tiny_model_path):
    from vosti_plugin.integration.engine_presets import build_llm

    saved = vosti_backend.SPLIT_WORKSPACE_BYTES["cpu"]
    vosti_backend.SPLIT_WORKSPACE_BYTES["cpu"] = LIMIT_BYTES
    try:
        llm = build_llm(tiny_model_path, skip_tokenizer_init=True, max_num_batched_tokens=128, max_model_len=256,
                        enforce_eager=True, max_logprobs=-1)
        yield llm
    finally:
        vosti_backend.SPLIT_WORKSPACE_BYTES["cpu"] = saved
    del llm
    gc.collect()


def _impl_state(llm):
    def collect(model):
        return sorted({(m.impl._path, m.impl._capacity) for m in model.modules() if hasattr(m, "impl")})

    return set(sum(llm.apply_model(collect), []))


def test_step_split_into_launches_keeps_logits_bitwise_and_correct(small_workspace_llm, tiny_model_path):
    with forward_counters.counting() as calls:
        alone = [raw_logits(small_workspace_llm, [p])[0] for p in PROMPTS]
    ((path, capacity),) = _impl_state(small_workspace_llm)
    assert path == "split" and 1 <= capacity < len(PROMPTS[1]), (path, capacity)
    assert calls["attention_in_launches"] > 0, "no step ran as several launches"
    together = raw_logits(small_workspace_llm, list(PROMPTS))
    assert together == alone

    assert_first_step_matches_reference(tiny_model_path, PROMPTS[0], alone[0][0])
