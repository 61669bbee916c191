"""Real vLLM (CPU): every attention launch form a step can take is launched in vLLM's profiling run, before
serving, with what Triton specializes on (strides, block-table width, pointer alignment, constexprs) equal to the
served launches'. On a GPU a form first met while serving compiles mid-step (the H100 showed Gemma-3-4B's fused
prefill of window layers doing so). Here the deployment runs all three forms (decode tiles, split with a FOLD
combine, fused prefill) on a model with window and global layers, and each served launch's signature must be one
the warm-up launched."""
import gc

import pytest

from vosti_plugin.attention import backend as vosti_backend
from vosti_plugin.attention import paged_attention as kernels

from tests.launch_signatures import recording
from tests.test_norm_launch_pairs_vllm import TINY, _save_tiny

pytestmark = pytest.mark.vllm

PROMPTS = ([(i * 37 + 11) % 500 + 3 for i in range(41)], [(i * 53 + 5) % 500 + 3 for i in range(6)],
           [(i * 29 + 7) % 500 + 3 for i in range(19)])
FUSED_FROM = 16


def _fused(sig) -> bool:
    return dict(sig[2]).get("FUSED") == "True" and dict(sig[2]).get("FOLD") == "False"


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    from vllm import SamplingParams

    from vosti_plugin.integration.engine_presets import build_llm
    from vosti_plugin.vllm.attention_backend import VostiAttentionImpl

    config = Gemma3TextConfig(**TINY, num_hidden_layers=2, sliding_window=16, query_pre_attn_scalar=32,
                              layer_types=["sliding_attention", "full_attention"])
    path = _save_tiny(tmp_path_factory.mktemp("tiny-gemma3-warm"), Gemma3ForCausalLM, config, 78, 0.0)
    warm_up = VostiAttentionImpl._warm_up
    with pytest.MonkeyPatch.context() as mp, \
            recording(kernels, ("_paged_attention_segments_kernel", "_combine_segments_kernel")) as rec:
        mp.setenv("VOSTI_PREFILL_FUSED_FROM", str(FUSED_FROM))
        mp.setitem(vosti_backend.SPLIT_WORKSPACE_BYTES, "cpu", 64 << 20)   # the split path, as on a GPU

        def marked(self, *args, **kwargs):
            phase, rec.phase[0] = rec.phase[0], "warm-up"
            try:
                return warm_up(self, *args, **kwargs)
            finally:
                rec.phase[0] = phase

        mp.setattr(VostiAttentionImpl, "_warm_up", marked)
        vosti_backend._WARMED.clear()
        llm = build_llm(path, skip_tokenizer_init=True, max_num_batched_tokens=64, max_model_len=512)
        rec.phase[0] = "serving"
        llm.generate([{"prompt_token_ids": p} for p in PROMPTS], SamplingParams(max_tokens=4, temperature=0),
                     use_tqdm=False)
        llm.generate([{"prompt_token_ids": PROMPTS[0] + [5, 6, 7]}], SamplingParams(max_tokens=2, temperature=0),
                     use_tqdm=False)
        found = list(rec.launches)
    del llm
    gc.collect()
    return found


def test_every_served_launch_form_was_launched_in_the_warm_up(launches):
    warmed = {s for phase, s in launches if phase == "warm-up"}
    served = {s for phase, s in launches if phase == "serving"}
    assert served, "nothing was served"
    windows = {dict(s[2]).get("USE_WINDOW") for s in served if _fused(s)}
    assert windows == {"True", "False"}, f"the served steps ran no fused prefill on both layer kinds: {windows}"
    assert {dict(s[2]).get("FOLD") for s in served} >= {"True"}, "no step folded split partials"
    missing = served - warmed
    assert not missing, f"{len(missing)} launch forms first met while serving: {sorted(missing)[:2]}"


def test_the_warm_up_covers_what_nothing_else_launched_before_serving(launches):
    """The fused prefill forms: neither vLLM's own warm-up nor the launch check launches them with the engine's
    block table (the case the H100 compiled while serving), so dropping them from the warm-up fails the test
    above."""
    before = {s for phase, s in launches if phase == "-"}
    warmed_fused = {s for phase, s in launches if phase == "warm-up" and _fused(s)}
    served = {s for phase, s in launches if phase == "serving"}
    assert warmed_fused & served
    assert (warmed_fused & served) - before, "every served fused form was launched before the warm-up too"
