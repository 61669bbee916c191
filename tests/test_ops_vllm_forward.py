"""Inside real vLLM (CPU build): with the dense ops installed, every linear (incl. lm_head), RMSNorm,
fused add+RMSNorm and gated activation of the forward runs through vosti's kernels, and the raw logits
still match an independent transformers forward."""
import gc

import pytest
import torch

pytestmark = pytest.mark.vllm

PROMPT = [5, 77, 301, 42, 9, 123, 260, 11, 400, 17, 99, 3, 250, 71, 18, 200, 33, 64, 128, 7]
LOGIT_ATOL = 2e-4  # fp32 throughout; only summation orders differ from transformers


@pytest.fixture(scope="module")
def llm_with_vosti_ops(tiny_model_path):
    from vosti_plugin.integration.engine_presets import build_llm
    from vosti_plugin.ops import install

    install.install_for_vllm()
    llm = build_llm(tiny_model_path, vosti=False, max_num_batched_tokens=64)
    yield llm
    del llm
    gc.collect()
    install.disable()


def test_forward_dense_ops_run_through_vosti_and_match_reference(llm_with_vosti_ops, tiny_model_path):
    from transformers import LlamaForCausalLM
    from vllm import SamplingParams

    from vosti_plugin import forward_counters

    with forward_counters.counting() as calls:
        out = llm_with_vosti_ops.generate([{"prompt_token_ids": PROMPT}],
                                          SamplingParams(max_tokens=3, temperature=0, logprobs=20), use_tqdm=False)
    for op in ("linear", "rms_norm", "fused_add_rms_norm", "act_and_mul"):
        assert calls[op] > 0, f"{op} did not run through vosti inside vLLM"
    completion = out[0].outputs[0]
    model = LlamaForCausalLM.from_pretrained(tiny_model_path, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        ref = model(torch.tensor([PROMPT + list(completion.token_ids)])).logits[0].double()
    for i, top in enumerate(completion.logprobs):
        pos = len(PROMPT) - 1 + i
        for token, lp in top.items():
            assert abs(lp.logprob - ref[pos, token].item()) <= LOGIT_ATOL
