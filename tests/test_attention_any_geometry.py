"""Attention for the geometries people serve: any query-heads-per-KV-head ratio (the group is padded to a
power of two, padding rows masked) and head dims that are not a power of two (80, 96: lanes masked to 0).
Rows are bitwise batch-invariant and agree with an fp64 reference; through real vLLM the raw logits are
bitwise equal alone vs batched and match an independent transformers forward."""
import gc
import json
import os

import pytest
import torch

from vosti_plugin.attention.config import AttentionLaunchConfig, next_power_of_two, select_config
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch
from vosti_plugin.integration.reference_attention import reference_attention

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("queries_per_kv, head_dim", [(3, 32), (5, 16), (6, 80), (7, 24), (12, 16), (1, 96)])
@pytest.mark.parametrize("path", ["split", "fused"])
def test_rows_alone_equal_rows_batched_and_match_reference(queries_per_kv, head_dim, path, launch_guard_off):
    group = next_power_of_two(queries_per_kv)
    config = AttentionLaunchConfig(block_q=2, block_m=2 * group, block_n=8, segment=16, num_warps=4,
                                   num_stages=1, queries_per_kv=queries_per_kv)
    target = random_request(37, 5, queries_per_kv * 2, 2, head_dim, seed=queries_per_kv)
    neighbour = random_request(11, 3, queries_per_kv * 2, 2, head_dim, seed=99)
    alone = run_paged_batch(build_paged_batch([target], page_size=8, seed=1, fused_kv=True), config,
                            scale=0.3, path=path)[0]
    batched = run_paged_batch(build_paged_batch([neighbour, target], page_size=8, seed=2, padding_rows=2),
                              config, scale=0.3, path=path)[1]
    assert bitwise_equal(alone, batched)
    ref = reference_attention(target.queries.double(), target.keys.double(), target.values.double(),
                              target.positions(), scale=0.3)
    assert (alone.double() - ref).abs().max().item() < 1e-5


@pytest.mark.parametrize("queries_per_kv", [3, 5, 6, 7, 12, 64])
def test_catalog_config_for_any_ratio_pads_the_group(queries_per_kv):
    config = select_config(128, 8 * queries_per_kv, 8, 64, torch.bfloat16)
    assert config.queries_per_kv == queries_per_kv
    assert config.group == next_power_of_two(queries_per_kv) and config.block_m == config.block_q * config.group


# (queries per KV head, head dim) served by real vLLM. Each engine runs through the interpreter for minutes on
# 2 cores, so the default run serves two: a padded group with a padded head dim (3, 80) and a padded group
# with a native one (6, 32); VOSTI_TEST_GEOMETRIES=all adds (5, 96) and (7, 64). The kernel tests above
# cover every ratio and head dim on both attention paths.
GEOMETRIES = [(3, 80), (6, 32)] + ([(5, 96), (7, 64)] if os.environ.get("VOSTI_TEST_GEOMETRIES") == "all" else [])
PROMPTS = [[5, 77, 301, 42, 9, 123, 260, 11, 400, 17, 99, 3, 250, 71, 18, 200, 33, 64, 128, 7],
           [8, 8, 19, 300], [120, 121, 122, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
                             24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37]]
LOGIT_ATOL = 2e-4


def _model(tmp_path, queries_per_kv: int, head_dim: int):
    from safetensors.torch import save_file

    from vosti_plugin.integration.tiny_model import GEOMETRY, random_llama_weights

    kv_heads = 2
    geometry = dict(GEOMETRY, num_attention_heads=queries_per_kv * kv_heads, num_key_value_heads=kv_heads,
                    head_dim=head_dim, hidden_size=16 * queries_per_kv * kv_heads)   # transformers: heads | hidden
    d = tmp_path / f"llama-q{queries_per_kv}-d{head_dim}"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(geometry))
    save_file(random_llama_weights(geometry, seed=queries_per_kv * 1000 + head_dim), str(d / "model.safetensors"),
              metadata={"format": "pt"})
    return d


def _views(outputs):
    return [[sorted((t, lp.logprob) for t, lp in step.items()) for step in o.outputs[0].logprobs] for o in outputs]


# Each geometry's engine proves its attention configs first: 3-4 minutes each on 2 cores with a cold proof cache.
@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.parametrize("queries_per_kv, head_dim", GEOMETRIES)
def test_vllm_serves_geometry_bitwise_and_matches_reference(tmp_path, queries_per_kv, head_dim):
    from transformers import LlamaForCausalLM
    from vllm import SamplingParams

    from vosti_plugin.integration.engine_presets import build_llm

    model = _model(tmp_path, queries_per_kv, head_dim)
    llm = build_llm(str(model), skip_tokenizer_init=True, max_num_batched_tokens=16)
    try:
        params = SamplingParams(temperature=0.0, max_tokens=3, logprobs=20)
        prompts = [{"prompt_token_ids": p} for p in PROMPTS]
        alone_outputs = [llm.generate([p], params, use_tqdm=False)[0] for p in prompts]
        batched = _views(llm.generate(list(reversed(prompts)), params, use_tqdm=False))[::-1]
        assert _views(alone_outputs) == batched   # floats compared exactly (== on Python floats)
        out = alone_outputs[0].outputs[0]
    finally:
        del llm
        gc.collect()
    ref_model = LlamaForCausalLM.from_pretrained(str(model), torch_dtype=torch.float32).eval()
    with torch.no_grad():
        ref = ref_model(torch.tensor([PROMPTS[0] + list(out.token_ids)])).logits[0].double()
    worst = max(abs(lp.logprob - ref[len(PROMPTS[0]) - 1 + i, t].item())
                for i, top in enumerate(out.logprobs) for t, lp in top.items())
    print(f"q/kv {queries_per_kv}, head dim {head_dim}: alone == batched, max |logit - reference| {worst:.2e}")
    assert worst <= LOGIT_ATOL
