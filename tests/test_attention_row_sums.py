"""Softmax row sums by an MMA against ones (by geometry, or VOSTI_ATTENTION_ROW_SUMS=dot): the rule and the switch, the configs it gives
(decode tiles then keep the config's warps), the kernel's rows against the float64 reference and across tile
heights, its proofs, and real vLLM on the CPU with it and the 16-row decode tiles.

On the H200, tl.sum's reduction tree follows the tile's layout, so 16- and 64-row tiles give other bits; with the
row sum taken by a dot the two heights gave one digest in all 57 cases of session 21 (`integration/results/h200-s21`).
With the switch off the kernel compiles to the same sm_90a instructions as without the constexpr."""
import pytest
import torch

from vosti_plugin.attention.config import decode_config, row_sums_override, select_config
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch
from vosti_plugin.integration.reference_attention import reference_attention


def test_the_geometry_picks_the_row_sums_and_the_switch_overrides_them(monkeypatch):
    """Unset: dot for 16-bit head dim 256 (where the H200 timed it faster), tl.sum elsewhere and in fp32."""
    monkeypatch.delenv("VOSTI_ATTENTION_ROW_SUMS", raising=False)
    assert row_sums_override() is None
    by_dot = {(d, dt): select_config(d, 8, 4, 64, dt).row_sums_by_dot
              for d in (64, 128, 256) for dt in (torch.bfloat16, torch.float16, torch.float32)}
    assert {k for k, v in by_dot.items() if v} == {(256, torch.bfloat16), (256, torch.float16)}
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "DOT")
    assert row_sums_override() == "dot" and select_config(128, 32, 8, 64, torch.bfloat16).row_sums_by_dot
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "sum")
    assert not select_config(256, 8, 4, 64, torch.bfloat16).row_sums_by_dot
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


@pytest.mark.slow
def test_the_catalog_lists_one_row_sum_mode_and_proves_it(monkeypatch):
    """The catalog proves the modes deployments run (unset: each geometry's own; =sum or =dot: that one only; its
    stored verification is kept per value); one attention group of the dot mode is proved with real Z3."""
    from vosti_plugin.verifier.api import _fingerprint, _run_group, catalog_entries, catalog_plan

    def modes() -> set:
        entry = next(e for e in catalog_entries() if e["kernel"].fn.__name__ == "_paged_attention_segments_kernel")
        return {c["ROW_SUMS_BY_DOT"] for c, _fam in entry["configs"]} | {f["row_sums_by_dot"] for _c, f in entry["configs"]}

    monkeypatch.delenv("VOSTI_ATTENTION_ROW_SUMS", raising=False)
    fps = {_fingerprint(None)}
    assert modes() == {False, True}   # head dim 256 in 16 bits sums by dot
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "sum")
    assert modes() == {False}
    fps.add(_fingerprint(None))
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "dot")
    assert modes() == {True}
    fps.add(_fingerprint(None))
    assert len(fps) == 3
    groups, _ = catalog_plan("_paged_attention_segments_kernel")
    group = next(g for g in groups if g.goal == "causal_segment_partials" and g.task[2]["DOT_PRECISION"] == "tf32")
    out = _run_group(group.task)
    print(f"{group.goal} over {len(group.members)} configs with dot row sums: {out['status']} in {out['seconds']:.1f} s")
    assert out["status"] == "proved", out["message"]


@pytest.mark.slow
@pytest.mark.vllm
def test_dot_row_sums_and_decode_tiles_inside_vllm_keep_the_logits(tiny_model_path, monkeypatch):
    """Real vLLM (CPU), split path, both switches on: decode-only steps launch 16-row tiles with the prefill tiles'
    warps, every launch sums rows by dot; raw logits bitwise the same alone, batched and staggered, and the first
    step against an independent reference forward. The launch check proves the dot mode's groups on demand."""
    from tests.reference_forward import assert_first_step_matches_reference
    from tests.test_attention_decode_tiles import PROMPTS, run_on_the_split_path

    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "dot")
    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
    launches, alone, together, staggered, paths = run_on_the_split_path(tiny_model_path, monkeypatch)
    assert paths == {"split"} and {kw["config"].row_sums_by_dot for _tokens, kw in launches} == {True}
    decode = {(kw["config"].block_m, kw["config"].num_warps) for tokens, kw in launches if tokens <= len(PROMPTS)}
    prefill = {(kw["config"].block_m, kw["config"].num_warps) for tokens, kw in launches if tokens > len(PROMPTS)}
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
    from tests.test_attention_decode_tiles import decoded_rows_that_differ

    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "dot")
    config = select_config(head_dim, q_heads, kv_heads, 64, torch.bfloat16)
    differ = decoded_rows_that_differ(config, decode_config(config, 16), head_dim, q_heads, kv_heads, window, context)
    print(f"dot row sums {head_dim}/{q_heads}/{kv_heads} window {window} @ {context}: {differ} of 2048 differ")
    assert differ == 0
