"""Inside real vLLM (CPU), split path with a segment grid for a max_model_len far past the prompts: the
programs of segments past a step's longest sequence exit first (the step's bound is reduced on the device
and handed to every layer), and a request's raw logits are bitwise the same alone and batched, equal to
the same engine's with no bound (nothing exits) and with eager steps' grids sized from the step
(VOSTI_EAGER_STEP_GRID), and match an independent reference forward."""
import gc

import pytest

from vosti_plugin.attention import backend as vosti_backend

from tests.reference_forward import assert_first_step_matches_reference, raw_logits

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PROMPTS = ([(i * 37 + 11) % 500 + 3 for i in range(61)], [(i * 53 + 5) % 500 + 3 for i in range(45)])
MAX_MODEL_LEN = 1536          # three 512-position segments: the prompts live in the first


def test_dead_segments_exit_first_and_keep_logits_bitwise_and_correct(tiny_model_path, monkeypatch):
    from vosti_plugin.integration.engine_presets import build_llm

    monkeypatch.setitem(vosti_backend.SPLIT_WORKSPACE_BYTES, "cpu", 1 << 26)
    monkeypatch.setattr(vosti_backend, "_WORKSPACES", {})
    bounds, grids = [], []
    shipped = vosti_backend.paged_attention

    def spy(*args, **kwargs):
        bounds.append(int(kwargs["max_seq_len"][0]))
        grids.append(kwargs["max_seqlen_k"])
        return shipped(*args, **kwargs)

    monkeypatch.setattr(vosti_backend, "paged_attention", spy)
    monkeypatch.setattr(vosti_backend, "EAGER_STEP_GRID", False)        # first every step's grid covers max_model_len
    llm = build_llm(tiny_model_path, skip_tokenizer_init=True, max_num_batched_tokens=128,
                    max_model_len=MAX_MODEL_LEN, enforce_eager=True, max_logprobs=-1)
    try:
        monkeypatch.setattr(vosti_backend, "DEAD_SEGMENT_EXIT_MIN_SEGMENTS", 1)      # the in-process engine reads it
        alone = [raw_logits(llm, [p])[0] for p in PROMPTS]
        together = raw_logits(llm, list(PROMPTS))
        exit_bounds, bounds[:] = list(bounds), []
        monkeypatch.setattr(vosti_backend, "DEAD_SEGMENT_EXIT_MIN_SEGMENTS", 10**6)
        no_bound_alone = [raw_logits(llm, [p])[0] for p in PROMPTS]
        max_grids, grids[:] = set(grids), []
        monkeypatch.setattr(vosti_backend, "EAGER_STEP_GRID", True)     # eager steps: grid from the step
        step_grid_alone = [raw_logits(llm, [p])[0] for p in PROMPTS]
        step_grid_together = raw_logits(llm, list(PROMPTS))
        paths = set(sum(llm.apply_model(lambda m: [m_.impl._path for m_ in m.modules() if hasattr(m_, "impl")]), []))
    finally:
        del llm
        gc.collect()
    assert paths == {"split"}
    assert together == alone
    longest = max(len(p) for p in PROMPTS) + 3
    assert exit_bounds and max(exit_bounds) <= longest < 512, "the layers were not given the step's longest sequence"
    assert no_bound_alone == alone
    assert max_grids == {MAX_MODEL_LEN}
    assert grids and max(grids) <= longest, "eager steps did not size the grid from the step's longest sequence"
    assert step_grid_alone == alone and step_grid_together == alone
    assert set(bounds) == {2**31 - 1}

    assert_first_step_matches_reference(tiny_model_path, PROMPTS[0], alone[0][0])
