"""Prefill steps fused in taller tiles, decode steps split with a FOLD combine (VOSTI_PREFILL_FUSED_FROM): the tile
rules, the three launch forms' rows bit for bit, the startup probe, the launch check, and the step choice inside real
vLLM (CPU). The verifier's chain that makes the three one algorithm is tests/test_verifier_fused_split_chain.py."""
import pytest
import torch

from vosti_plugin.attention.config import fold_config, fused_prefill_from, prefill_config, select_config
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch
from vosti_plugin.integration.reference_attention import reference_attention


# fold: (rows, tokens, warps, head blocks) of a FOLD program: one query head of one token, the KV head's heads over
# head-block programs, a warp for every 64 fp32 of the row
@pytest.mark.parametrize("head_dim, q_heads, kv_heads, dtype, prefill, fold", [
    (128, 32, 8, torch.bfloat16, (128, 32, 8), (1, 1, 2, 4)),     # Llama-3.1-8B: 64 rows on 4 warps -> 128 on 8
    (256, 8, 4, torch.bfloat16, (64, 32, 8), (1, 1, 4, 2)),       # Gemma-3-4B: already 8 warps, head dim 256: kept
    (128, 28, 4, torch.bfloat16, (128, 16, 8), (1, 1, 2, 7)),     # Qwen2.5-7B: 7 queries a KV head, a group of 8
    (128, 64, 1, torch.bfloat16, (128, 2, 8), (1, 1, 2, 64)),     # a group of 64
    (32, 4, 2, torch.float32, (64, 32, 8), (1, 1, 1, 2)),         # the CPU interpreter's 32-row tiles
])
def test_prefill_and_fold_tiles(head_dim, q_heads, kv_heads, dtype, prefill, fold):
    config = select_config(head_dim, q_heads, kv_heads, 16, dtype)
    p, f = prefill_config(config, head_dim, 16), fold_config(config, head_dim)
    assert (p.block_m, p.block_q, p.num_warps, p.kv_tma) == (*prefill, False)
    assert (f.block_m, f.block_q, f.num_warps, f.head_blocks) == fold
    # each warp keeps the rows it holds in the config's tiles; the key tiles, segments and row sums are the config's
    assert p.block_m // p.num_warps == config.block_m // config.num_warps
    for c in (p, f):
        assert (c.block_n, c.segment, c.row_sums_by_dot) == (config.block_n, config.segment, config.row_sums_by_dot)
    assert p.group == config.group and p.head_blocks == 1
    assert f.group * f.head_blocks >= config.queries_per_kv > f.group * (f.head_blocks - 1)


@pytest.mark.parametrize("head_dim, q_heads, kv_heads, dtype, page", [
    (128, 32, 8, torch.bfloat16, 64), (256, 8, 4, torch.bfloat16, 64), (96, 24, 8, torch.float16, 64),
    (32, 4, 2, torch.float32, 32)])
def test_prefill_reads_kv_by_tma_in_the_config_tiles_where_a_tile_is_a_page(head_dim, q_heads, kv_heads, dtype, page):
    config = select_config(head_dim, q_heads, kv_heads, page, dtype)
    assert config.block_n == page and not config.kv_tma
    p = prefill_config(config, head_dim, page)
    assert p.kv_tma and p.num_stages == (2 if head_dim > 128 else 3)   # head dim 256 spills less on 2 stages
    assert (p.block_m, p.block_q, p.num_warps, p.block_n, p.segment) == \
        (config.block_m, config.block_q, config.num_warps, config.block_n, config.segment)
    assert not fold_config(config, head_dim).kv_tma


def test_head_blocks_must_cover_the_query_heads_exactly():
    from vosti_plugin.attention.config import AttentionLaunchConfig

    base = dict(block_q=1, block_n=64, segment=512, num_warps=2, num_stages=2, queries_per_kv=4)
    assert AttentionLaunchConfig(block_m=2, head_blocks=2, **base).group == 2
    for block_m, blocks in ((1, 3), (1, 5), (2, 3), (4, 2), (1, 0)):
        with pytest.raises(ValueError, match="head_blocks"):
            AttentionLaunchConfig(block_m=block_m, head_blocks=blocks, **base)
    with pytest.raises(ValueError, match="rounded up to a power of two"):
        AttentionLaunchConfig(block_m=1, **base)    # one head a program needs head blocks


def test_the_switch_is_on_by_default_for_16_bit_groups_of_up_to_8_and_names_what_it_takes(monkeypatch):
    monkeypatch.delenv("VOSTI_PREFILL_FUSED_FROM", raising=False)
    for dtype in (torch.bfloat16, torch.float16):
        assert [fused_prefill_from(dtype, qpk) for qpk in (1, 3, 4, 7, 8, 9, 16)] == [512] * 5 + [0, 0]
    assert fused_prefill_from(torch.float32, 4) == 0            # the CPU interpreter
    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "0")
    assert fused_prefill_from(torch.bfloat16, 4) == 0
    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "64")
    assert fused_prefill_from(torch.float32, 16) == fused_prefill_from(torch.bfloat16, 64) == 64
    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "yes")
    with pytest.raises(ValueError, match="a number of query tokens"):
        fused_prefill_from(torch.bfloat16, 4)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("window, soft_cap, page", [(None, None, 16), (300, None, 16), (None, 20.0, 16),
                                                    (None, None, 32), (300, None, 32)],
                         ids=["causal", "window", "soft-cap", "causal-tma", "window-tma"])
def test_fused_prefill_rows_equal_the_split_rows_folded_or_combined(window, soft_cap, page):
    """Three launch forms of one batch (a chunk over two segments of cached keys beside short prefills and decodes):
    split + the combine kernel, split + FOLD, fused in the prefill tiles (pages of 32 = the fp32 KV tile: K/V read
    by TMA descriptors, on the interpreter); every row bitwise the same in all three, and within fp32 rounding of
    an independent float64 reference."""
    heads, dim = (4, 2), 32
    config = select_config(dim, heads[0], heads[1], page, torch.float32)
    requests = [random_request(700, 70, *heads, dim, seed=1), random_request(9, 9, *heads, dim, seed=2),
                random_request(530, 1, *heads, dim, seed=3), random_request(41, 3, *heads, dim, seed=4)]
    batch = build_paged_batch(requests, page_size=page, seed=5, padding_rows=2, fused_kv=page == 32)
    kwargs = dict(scale=dim ** -0.5, sliding_window=window, soft_cap=soft_cap)
    combined = run_paged_batch(batch, config, path="split", **kwargs)
    folded = run_paged_batch(batch, config, path="split", fold=fold_config(config, dim), **kwargs)
    prefill = prefill_config(config, dim, page)
    assert prefill.kv_tma == (page == 32)
    fused = run_paged_batch(batch, prefill, path="fused", **kwargs)
    for req, a, b, c in zip(requests, combined, folded, fused):
        assert bitwise_equal(a, b) and bitwise_equal(a, c)
        ref = reference_attention(req.queries.double(), req.keys.double(), req.values.double(), req.positions(),
                                  scale=dim ** -0.5, sliding_window=window, soft_cap=soft_cap)
        torch.testing.assert_close(c.double(), ref, atol=2e-5, rtol=1e-5)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_startup_probe_compares_fused_prefill_rows_with_split_rows(monkeypatch):
    from tests.test_host_numerics import assert_only_probe_refuses_under_tile_height_dot, tiny_facts
    from vosti_plugin.launch import host_numerics

    facts = tiny_facts()
    monkeypatch.delenv("VOSTI_PREFILL_FUSED_FROM", raising=False)
    host_numerics.clear_cache()
    try:
        assert "paged_attention/fused-prefill" not in {p.name for p in host_numerics.run_self_test(facts).probes}
        monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "512")
        on = host_numerics.run_self_test(facts)
        assert on.ok and "paged_attention/fused-prefill" in {p.name for p in on.probes}, \
            host_numerics.describe_failure(on)

        config = select_config(facts.head_size, facts.num_q_heads, facts.num_kv_heads, facts.page_size, torch.float32)
        taller = prefill_config(config, facts.head_size, facts.page_size).block_m
        assert taller > config.block_m
        monkeypatch.setenv("VOSTI_MID_GEMM", "0")   # GEMM tiles of `taller` rows would fail their own probes too
        assert_only_probe_refuses_under_tile_height_dot(monkeypatch, facts, taller, "paged_attention/fused-prefill",
                                                        "set VOSTI_PREFILL_FUSED_FROM=0")
    finally:
        host_numerics.clear_cache()


def test_launch_check_wants_the_prefill_and_fold_configs_only_when_on(monkeypatch):
    import dataclasses

    from tests.test_host_numerics import tiny_facts
    from vosti_plugin.launch.verified import kernel_configs_for, wanted_configs

    facts = tiny_facts()
    fused = {"paged_attention/prefill", "paged_attention/fold"}
    monkeypatch.delenv("VOSTI_PREFILL_FUSED_FROM", raising=False)
    assert not fused & set(kernel_configs_for(facts))        # fp32: off by default
    assert fused <= set(kernel_configs_for(dataclasses.replace(facts, dtype="bfloat16")))   # 16-bit: on
    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "0")
    assert not fused & set(kernel_configs_for(dataclasses.replace(facts, dtype="bfloat16")))
    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "64")
    configs = kernel_configs_for(facts)
    assert configs["paged_attention/prefill"]["block_m"] == 2 * configs["paged_attention"]["block_m"]
    assert configs["paged_attention/fold"]["block_q"] == 1
    assert len(wanted_configs(facts)["paged_attention"]) == 3


@pytest.mark.slow
@pytest.mark.vllm
def test_prefill_steps_run_fused_inside_vllm_and_keep_the_logits(tiny_model_path, monkeypatch):
    """Real vLLM (CPU), a split deployment with VOSTI_PREFILL_FUSED_FROM=16: steps of 16+ tokens with a prefill launch
    the fused path in the split tiles with K/V read by TMA descriptors (the deployment's page of 32 is the fp32 KV
    tile; the interpreter runs the loads), the others the split path with a FOLD combine; a request's raw logits are
    bitwise the same alone, batched, and staggered (its rows computed by the other path in another step), and match
    an independent reference forward."""
    from tests.reference_forward import assert_first_step_matches_reference
    from tests.test_attention_decode_tiles import PROMPTS, run_on_the_split_path

    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "16")
    launches, alone, together, staggered, paths = run_on_the_split_path(tiny_model_path, monkeypatch)
    assert paths == {"split"}
    fused = {(kw["config"].block_m, kw["config"].kv_tma, kw["fold"]) for tokens, kw in launches if kw["path"] == "fused"}
    split = {(kw["config"].block_m, kw["config"].kv_tma, kw["fold"].block_q) for tokens, kw in launches
             if kw["path"] == "split"}
    assert fused == {(32, True, None)} and split == {(32, False, 1)}, launches
    assert all(tokens >= 16 for tokens, kw in launches if kw["path"] == "fused")
    assert together == alone
    assert staggered[0] == staggered[1] == alone[0] and staggered[2] == alone[1]
    assert_first_step_matches_reference(tiny_model_path, PROMPTS[0], alone[0][0])


def test_a_fold_config_of_other_segments_is_refused():
    import dataclasses

    config = select_config(32, 4, 2, 16, torch.float32)
    batch = build_paged_batch([random_request(40, 3, 4, 2, 32, seed=1)], page_size=16, seed=1)
    other = dataclasses.replace(fold_config(config, 32), segment=256)
    with pytest.raises(ValueError, match="must fold the config's segments"):
        run_paged_batch(batch, config, path="split", fold=other, scale=0.1)
