"""Softmax row sums by an MMA against ones (VOSTI_ATTENTION_ROW_SUMS=dot): the switch, the configs it gives
(decode tiles then keep the config's warps), the kernel's rows against the float64 reference and across tile
heights, its proofs, and real vLLM on the CPU with it and the 16-row decode tiles.

On the H200, tl.sum's reduction tree follows the tile's layout, so 16- and 64-row tiles give other bits; with the
row sum taken by a dot the two heights gave one digest in all 57 cases of session 21 (`integration/results/h200-s21`).
With the switch off the kernel compiles to the same sm_90a instructions as without the constexpr."""
import gc

import pytest
import torch

from vosti_plugin.attention.config import attention_row_sums, decode_config, select_config
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch
from vosti_plugin.integration.reference_attention import reference_attention


def test_the_switch_defaults_to_tl_sum_and_names_its_values(monkeypatch):
    monkeypatch.delenv("VOSTI_ATTENTION_ROW_SUMS", raising=False)
    assert attention_row_sums() == "sum"
    assert not select_config(128, 32, 8, 64, torch.bfloat16).row_sums_by_dot
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "DOT")
    assert attention_row_sums() == "dot" and select_config(128, 32, 8, 64, torch.bfloat16).row_sums_by_dot
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "mma")
    with pytest.raises(ValueError, match="row sums are sum or dot"):
        select_config(128, 32, 8, 64, torch.bfloat16)


@pytest.mark.parametrize("head_dim, q_heads, kv_heads, want", [
    (128, 32, 8, (16, 4)),      # Llama-3.1-8B: 16 rows on the config's 4 warps (tl.sum's rule: 1 warp)
    (256, 8, 4, (16, 8)),       # Gemma-3-4B: on 8 warps (tl.sum's rule: 2)
    (128, 32, 1, (32, 4)),      # a group of 32
])
def test_decode_tiles_keep_the_configs_warps_under_dot_sums(monkeypatch, head_dim, q_heads, kv_heads, want):
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "dot")
    config = select_config(head_dim, q_heads, kv_heads, 64, torch.bfloat16)
    decode = decode_config(config, 16)
    assert (decode.block_m, decode.num_warps) == want and decode.row_sums_by_dot
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "sum")
    assert decode_config(select_config(head_dim, q_heads, kv_heads, 64, torch.bfloat16), 16).num_warps < want[1]


@pytest.mark.parametrize("window", [None, 40])
def test_dot_row_sums_match_the_reference_and_decode_tiles_keep_the_prefill_rows(monkeypatch, window):
    """Interpreter, fp32: a chunk in the prefill tiles against the float64 reference, and each of its positions
    decoded in 16-row tiles bit for bit against its prefill row (the interpreter's sums are order-fixed, so this
    checks the launches; the GPU's half is the gpu test below and the startup probe)."""
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "dot")
    config = select_config(32, 8, 2, 16, torch.float32)
    decode = decode_config(config, 16)
    assert config.row_sums_by_dot and decode.block_m < config.block_m
    req = random_request(300, 24, 8, 2, 32, seed=9)
    kwargs = dict(scale=32 ** -0.5, sliding_window=window)
    prefilled = run_paged_batch(build_paged_batch([req], page_size=16, seed=1), config, **kwargs)[0]
    ref = reference_attention(req.queries.double(), req.keys.double(), req.values.double(), req.positions(),
                              scale=32 ** -0.5, sliding_window=window)
    assert (prefilled.double() - ref).abs().max().item() < 1e-5
    fused = run_paged_batch(build_paged_batch([req], page_size=16, seed=3), config, path="fused", **kwargs)[0]
    assert bitwise_equal(prefilled, fused)
    decoded = run_paged_batch(build_paged_batch([req.chunk(i, i + 1) for i in range(req.q_len)], page_size=16,
                                                seed=2, padding_rows=3), decode, **kwargs)
    assert bitwise_equal(prefilled, torch.cat(decoded))


def test_the_catalog_lists_one_row_sum_mode_and_proves_it(monkeypatch):
    """The catalog proves the deployment's mode only (its stored verification is kept per value); one attention
    group of the dot mode is proved with real Z3."""
    from vosti_plugin.verifier.api import _fingerprint, _run_group, catalog_entries, catalog_plan

    def modes() -> set:
        entry = next(e for e in catalog_entries() if e["kernel"].fn.__name__ == "_paged_attention_segments_kernel")
        return {c["ROW_SUMS_BY_DOT"] for c, _fam in entry["configs"]} | {f["row_sums_by_dot"] for _c, f in entry["configs"]}

    monkeypatch.delenv("VOSTI_ATTENTION_ROW_SUMS", raising=False)
    default_fp = _fingerprint(None)
    assert modes() == {False}
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "sum")
    assert _fingerprint(None) == default_fp
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "dot")
    assert modes() == {True} and _fingerprint(None) != default_fp
    groups, _ = catalog_plan("_paged_attention_segments_kernel")
    group = next(g for g in groups if g.goal == "causal_segment_partials" and g.task[2]["DOT_PRECISION"] == "tf32")
    out = _run_group(group.task)
    print(f"{group.goal} over {len(group.members)} configs with dot row sums: {out['status']} in {out['seconds']:.1f} s")
    assert out["status"] == "proved", out["message"]


PROMPTS = ([(i * 37 + 11) % 500 + 3 for i in range(61)], [(i * 53 + 5) % 500 + 3 for i in range(45)],
           [(i * 29 + 7) % 500 + 3 for i in range(9)])


@pytest.mark.vllm
def test_dot_row_sums_and_decode_tiles_inside_vllm_keep_the_logits(tiny_model_path, monkeypatch):
    """Real vLLM (CPU), split path, both switches on: decode-only steps launch 16-row tiles with the prefill tiles'
    warps, every launch sums rows by dot; raw logits bitwise the same alone, batched and staggered, and the first
    step against an independent reference forward. The launch check proves the dot mode's groups on demand."""
    from tests.reference_forward import assert_first_step_matches_reference, raw_logits
    from vosti_plugin.attention import backend as vosti_backend
    from vosti_plugin.integration.engine_presets import build_llm

    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "dot")
    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
    monkeypatch.setitem(vosti_backend.SPLIT_WORKSPACE_BYTES, "cpu", 1 << 26)
    monkeypatch.setattr(vosti_backend, "_WORKSPACES", {})
    launches = []
    shipped = vosti_backend.paged_attention

    def spy(q, *args, **kwargs):
        config = kwargs["config"]
        launches.append((q.shape[0], config.block_m, config.num_warps, config.row_sums_by_dot))
        return shipped(q, *args, **kwargs)

    monkeypatch.setattr(vosti_backend, "paged_attention", spy)
    llm = build_llm(tiny_model_path, skip_tokenizer_init=True, max_num_batched_tokens=64, max_model_len=1024,
                    enforce_eager=True, max_logprobs=-1)
    try:
        alone = [raw_logits(llm, [p])[0] for p in PROMPTS]
        together = raw_logits(llm, list(PROMPTS))
        staggered = raw_logits(llm, [PROMPTS[0]] * 2 + [PROMPTS[1]])
    finally:
        del llm
        gc.collect()
    assert {dot for *_rest, dot in launches} == {True}
    decode = {(rows, warps) for tokens, rows, warps, _dot in launches if tokens <= len(PROMPTS)}
    prefill = {(rows, warps) for tokens, rows, warps, _dot in launches if tokens > len(PROMPTS)}
    assert prefill == {(32, 4)} and decode == {(16, 4)}, launches
    assert together == alone
    assert staggered[0] == staggered[1] == alone[0] and staggered[2] == alone[1]
    assert_first_step_matches_reference(tiny_model_path, PROMPTS[0], alone[0][0])


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, q_heads, kv_heads, window", [(128, 32, 8, None), (256, 8, 4, 1024), (256, 8, 4, None)],
                         ids=["llama31-8b", "gemma3-4b-window", "gemma3-4b-global"])
@pytest.mark.parametrize("context", [1024, 8192])
def test_gpu_dot_row_sums_give_decode_tiles_the_prefill_rows(monkeypatch, head_dim, q_heads, kv_heads, window, context):
    """The platform half (H200, bf16): every position of a 2048-row chunk decoded in 16-row tiles on the config's
    warps, 16 at a time, against the chunk's rows in the 64-row prefill tiles, both summing rows by dot."""
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "dot")
    config = select_config(head_dim, q_heads, kv_heads, 64, torch.bfloat16)
    decode = decode_config(config, 16)
    req = random_request(context + 2048, 2048, q_heads, kv_heads, head_dim, seed=context, dtype=torch.bfloat16,
                         device="cuda")
    kwargs = dict(scale=head_dim ** -0.5, sliding_window=window, path="split")
    prefilled = run_paged_batch(build_paged_batch([req], page_size=64, seed=1), config, **kwargs)[0]
    differ = 0
    for first in range(0, req.q_len, 16):
        batch = build_paged_batch([req.chunk(i, i + 1) for i in range(first, first + 16)], page_size=64, seed=first)
        rows = torch.cat(run_paged_batch(batch, decode, **kwargs))
        differ += sum(not bitwise_equal(prefilled[first + i], rows[i]) for i in range(16))
    print(f"dot row sums {head_dim}/{q_heads}/{kv_heads} window {window} @ {context}: {differ} of {req.q_len} differ")
    assert differ == 0
