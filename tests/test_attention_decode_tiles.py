"""Decode-only steps in shorter row tiles (where rows are summed by dot, or VOSTI_DECODE_TILE_ROWS): the rule, the catalog's cross proofs, the
startup probe, and the step choice inside real vLLM (CPU).

A decode program holds one token's rows, so most of a 64-row tile is padding; the decode config keeps each warp's
rows and shortens the tile. The verifier proves a decode row's segment partials equal to the prefill config's
(`causal_segment_partials across`); whether the GPU's row sums reduce in the same order in both tile shapes is a
platform fact the `host-numerics` probe checks at startup."""
import gc
import json

import pytest
import torch

from vosti_plugin.attention.config import decode_config, decode_tile_rows, select_config
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch


@pytest.mark.parametrize("head_dim, q_heads, kv_heads, dtype, want", [
    (128, 32, 8, torch.bfloat16, (16, 4, 1)),     # Llama-3.1-8B: 64 rows on 4 warps -> 16 rows on 1
    (256, 8, 4, torch.bfloat16, (16, 8, 2)),      # Gemma-3-4B: 64 rows on 8 warps -> 16 rows on 2
    (64, 14, 2, torch.float16, (16, 2, 1)),       # Qwen2.5-0.5B: 7 queries per KV head, a group of 8
    (128, 32, 1, torch.bfloat16, (32, 1, 2)),     # a group of 32: one token is 32 rows
    (128, 64, 1, torch.bfloat16, None),           # a group of 64 fills the 64-row tile: no decode config
    (32, 4, 2, torch.float32, (16, 8, 2)),        # the CPU interpreter's 32-row tiles
])
def test_decode_config_keeps_each_warps_rows(monkeypatch, head_dim, q_heads, kv_heads, dtype, want):
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", "sum")   # tl.sum's rows follow the warps (dot's: test_attention_row_sums)
    config = select_config(head_dim, q_heads, kv_heads, 64, dtype)
    decode = decode_config(config, 16)
    if want is None:
        assert decode == config
        return
    assert (decode.block_m, decode.block_q, decode.num_warps) == want
    assert decode.block_m // decode.num_warps == config.block_m // config.num_warps
    assert (decode.block_n, decode.segment, decode.group, decode.queries_per_kv) == \
        (config.block_n, config.segment, config.group, config.queries_per_kv)
    assert decode_config(config, 0) == config


def test_decode_tiles_follow_the_row_sums_unless_the_switch_names_them(monkeypatch):
    monkeypatch.delenv("VOSTI_DECODE_TILE_ROWS", raising=False)
    monkeypatch.delenv("VOSTI_ATTENTION_ROW_SUMS", raising=False)
    llama = select_config(128, 32, 8, 64, torch.bfloat16)
    gemma = select_config(256, 8, 4, 64, torch.bfloat16)   # row sums by dot, by geometry
    cpu_gemma = select_config(256, 8, 4, 64, torch.float32)
    assert [decode_tile_rows(c) for c in (llama, gemma, cpu_gemma)] == [0, 16, 0]
    assert decode_config(gemma, decode_tile_rows(gemma)).block_m == 16
    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
    assert decode_tile_rows(llama) == 16
    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "0")
    assert decode_tile_rows(gemma) == 0
    for bad in ("8", "sixteen", "-16"):
        monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", bad)
        with pytest.raises(ValueError, match="decode tiles of 16 rows are proved"):
            decode_tile_rows(llama)


def test_decoded_rows_in_decode_tiles_equal_the_prefill_rows():
    """Kernel level, split path: a chunk's rows in the prefill tiles and each of its positions decoded in a batch
    of decodes in 16-row tiles (the interpreter's sums are order-fixed, so this checks the launch, not the GPU)."""
    config = select_config(32, 8, 2, 16, torch.float32)
    decode = decode_config(config, 16)
    assert decode.block_m < config.block_m
    req = random_request(600, 20, 8, 2, 32, seed=5)
    prefilled = run_paged_batch(build_paged_batch([req], page_size=16, seed=1), config, scale=32 ** -0.5)[0]
    decoded = run_paged_batch(build_paged_batch([req.chunk(i, i + 1) for i in range(req.q_len)], page_size=16,
                                                seed=2, padding_rows=3), decode, scale=32 ** -0.5)
    assert bitwise_equal(prefilled, torch.cat(decoded))


def test_catalog_lists_the_decode_configs_launched_and_keeps_a_stored_catalog_per_switch_value(monkeypatch):
    """Unset, only the geometries whose rows are summed by dot (16-bit head dim 256) launch decode tiles, so only
    theirs are proved; =0 none, =16 every geometry's (and the stored catalog is kept per value)."""
    from vosti_plugin.verifier.api import _fingerprint, catalog_entries

    def decode_launches() -> list[dict]:
        entry = next(e for e in catalog_entries() if e["kernel"].fn.__name__ == "_paged_attention_segments_kernel")
        decode_pairs = [pair for pair in entry["cross"] if len(pair) == 3]   # 4: the fused prefill's chain
        tiles = [c for c, fam in entry["configs"] if fam["block_m"] < 32 and not c["FOLD"]]   # FOLD: a row a program
        return [left for left, _right, _fam in decode_pairs] + tiles

    monkeypatch.delenv("VOSTI_ATTENTION_ROW_SUMS", raising=False)
    monkeypatch.delenv("VOSTI_DECODE_TILE_ROWS", raising=False)
    by_geometry, fps = decode_launches(), {_fingerprint(None)}
    assert by_geometry and {(c["HEAD_DIM"], c["DOT_PRECISION"], c["ROW_SUMS_BY_DOT"]) for c in by_geometry} == \
        {(256, "tf32", True)}
    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "0")
    assert decode_launches() == []
    fps.add(_fingerprint(None))
    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
    assert len(decode_launches()) > 1000
    fps.add(_fingerprint(None))
    assert len(fps) == 3


def test_catalog_proves_decode_configs_only_across_and_groups_them(monkeypatch):
    from vosti_plugin.verifier.api import catalog_entries, catalog_plan

    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
    groups, _ = catalog_plan("_paged_attention_segments_kernel")
    across = [g for g in groups if g.goal == "causal_segment_partials across"]
    own = [g for g in groups if not g.goal.endswith("across")]
    entry = next(e for e in catalog_entries() if e["kernel"].fn.__name__ == "_paged_attention_segments_kernel")
    decode_pairs = [pair for pair in entry["cross"] if len(pair) == 3]   # 4: the fused prefill's chain
    decode_rows = {json.dumps(left, sort_keys=True) for left, _right, _fam in decode_pairs}
    assert decode_rows and all(left["BLOCK_M"] < right["BLOCK_M"] for left, right, _ in decode_pairs)
    # every decode launch of the catalog is proved, across, in one group per tile shape (not one per geometry)
    assert sum(len(g.members) for g in across) == len(decode_rows)
    assert len(across) == len({(g.task[2]["GROUP"], g.task[2]["BLOCK_M"], g.task[2]["DOT_PRECISION"],
                                g.task[2]["ROW_SUMS_BY_DOT"]) for g in across})
    assert len(across) <= 24
    assert not any(json.dumps(c, sort_keys=True) in decode_rows for g in own for c, _f in g.members)


def test_a_cross_group_over_its_domain_is_proved(monkeypatch):
    """One grouped cross proof (Llama-like group of 4, 16-bit tiles): every member geometry in one Z3 run."""
    from vosti_plugin.verifier.api import _run_group, catalog_plan

    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
    groups, _ = catalog_plan("_paged_attention_segments_kernel")
    group = next(g for g in groups if g.goal.endswith("across") and g.task[2]["GROUP"] == 4
                 and g.task[2]["DOT_PRECISION"] == "tf32")
    assert len(group.members) > 100 and group.task[5]["BLOCK_M"] == 64 and group.task[2]["BLOCK_M"] == 16
    out = _run_group(group.task)
    print(f"{group.goal} over {len(group.members)} configs: {out['status']} in {out['seconds']:.1f} s")
    assert out["status"] == "proved", out["message"]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("row_sums", ["sum", "dot"])
def test_startup_probe_checks_decoded_rows_against_prefill_rows(monkeypatch, row_sums):
    from vosti_plugin.launch import host_numerics
    from tests.test_host_numerics import assert_only_probe_refuses_under_tile_height_dot, tiny_facts

    facts = tiny_facts()
    monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", row_sums)
    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "0")
    host_numerics.clear_cache()
    try:
        off = host_numerics.run_self_test(facts)
        assert "paged_attention/decode-tiles" not in {p.name for p in off.probes}
        monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
        on = host_numerics.run_self_test(facts)
        assert on.ok and "paged_attention/decode-tiles" in {p.name for p in on.probes}, \
            host_numerics.describe_failure(on)

        prefill_rows = select_config(facts.head_size, facts.num_q_heads, facts.num_kv_heads, facts.page_size,
                                     torch.float32).block_m
        assert_only_probe_refuses_under_tile_height_dot(monkeypatch, facts, prefill_rows, "paged_attention/decode-tiles",
                                                        "set VOSTI_DECODE_TILE_ROWS=0")
    finally:
        host_numerics.clear_cache()


def test_launch_check_wants_the_decode_config_only_when_on(monkeypatch):
    from vosti_plugin.launch.verified import kernel_configs_for, wanted_configs
    from tests.test_host_numerics import tiny_facts

    facts = tiny_facts()
    monkeypatch.delenv("VOSTI_DECODE_TILE_ROWS", raising=False)
    monkeypatch.delenv("VOSTI_ATTENTION_ROW_SUMS", raising=False)
    assert "paged_attention/decode" not in kernel_configs_for(facts)
    assert len(wanted_configs(facts)["paged_attention"]) == 1
    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
    decode = kernel_configs_for(facts)["paged_attention/decode"]
    assert decode["block_m"] == 16
    assert len(wanted_configs(facts)["paged_attention"]) == 2


PROMPTS = ([(i * 37 + 11) % 500 + 3 for i in range(61)], [(i * 53 + 5) % 500 + 3 for i in range(45)],
           [(i * 29 + 7) % 500 + 3 for i in range(9)])


@pytest.mark.slow
@pytest.mark.vllm
def test_decode_steps_run_decode_tiles_inside_vllm_and_keep_the_logits(tiny_model_path, monkeypatch):
    """Real vLLM (CPU), split path, VOSTI_DECODE_TILE_ROWS=16: prefill and mixed steps launch the prefill tiles,
    decode-only steps the 16-row tiles; a request's raw logits are bitwise the same alone and batched with others
    (whose prefills land in its decode steps), and match an independent reference forward."""
    from tests.reference_forward import assert_first_step_matches_reference

    monkeypatch.setenv("VOSTI_DECODE_TILE_ROWS", "16")
    launches, alone, together, staggered, paths = run_on_the_split_path(tiny_model_path, monkeypatch)
    assert paths == {"split"}
    prefill_rows = {kw["config"].block_m for tokens, kw in launches if tokens > len(PROMPTS)}
    decode_rows = {kw["config"].block_m for tokens, kw in launches if tokens <= len(PROMPTS)}
    assert prefill_rows == {32} and decode_rows == {16}, launches
    assert together == alone
    assert staggered[0] == staggered[1] == alone[0] and staggered[2] == alone[1]
    assert_first_step_matches_reference(tiny_model_path, PROMPTS[0], alone[0][0])


def run_on_the_split_path(tiny_model_path, monkeypatch):
    """A real CPU engine on the split path whose attention launches are recorded as (tokens, keyword arguments:
    config, path, fold...): PROMPTS alone,
    together, and staggered (a prompt twice, then another); returns the launches, the three runs' raw logits and
    the attention paths the model ran."""
    from tests.reference_forward import raw_logits
    from vosti_plugin.attention import backend as vosti_backend
    from vosti_plugin.integration.engine_presets import build_llm

    monkeypatch.setitem(vosti_backend.SPLIT_WORKSPACE_BYTES, "cpu", 1 << 26)
    monkeypatch.setattr(vosti_backend, "_WORKSPACES", {})
    launches = []
    shipped = vosti_backend.paged_attention

    def spy(q, *args, **kwargs):
        launches.append((q.shape[0], dict(kwargs)))
        return shipped(q, *args, **kwargs)

    monkeypatch.setattr(vosti_backend, "paged_attention", spy)
    llm = build_llm(tiny_model_path, skip_tokenizer_init=True, max_num_batched_tokens=64, max_model_len=1024,
                    enforce_eager=True, max_logprobs=-1)
    try:
        alone = [raw_logits(llm, [p])[0] for p in PROMPTS]
        together = raw_logits(llm, list(PROMPTS))
        staggered = raw_logits(llm, [PROMPTS[0]] * 2 + [PROMPTS[1]])
        paths = set(sum(llm.apply_model(lambda m: [m_.impl._path for m_ in m.modules() if hasattr(m_, "impl")]), []))
    finally:
        del llm
        gc.collect()
    return launches, alone, together, staggered, paths


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, q_heads, kv_heads, window", [(128, 32, 8, None), (256, 8, 4, 1024), (256, 8, 4, None)],
                         ids=["llama31-8b", "gemma3-4b-window", "gemma3-4b-global"])
@pytest.mark.parametrize("context", [1024, 8192])
def test_gpu_decoded_rows_in_16_row_tiles_equal_the_prefill_rows(head_dim, q_heads, kv_heads, window, context):
    """The platform half (H200, bf16): every position of a 2048-row chunk decoded in 16-row tiles, 16 at a time in
    decode batches, against the chunk's rows in the prefill tiles. Run on the GPU: pytest -m gpu <this file>."""
    config = select_config(head_dim, q_heads, kv_heads, 64, torch.bfloat16)
    differ = decoded_rows_that_differ(config, decode_config(config, 16), head_dim, q_heads, kv_heads, window, context)
    print(f"{head_dim}/{q_heads}/{kv_heads} window {window} @ {context}: {differ} of 2048 decoded rows differ")
    assert differ == 0


def decoded_rows_that_differ(config, decode, head_dim: int, q_heads: int, kv_heads: int, window: int | None,
                             context: int) -> int:
    """On the GPU (bf16): how many positions of a 2048-row chunk at `context`, decoded 16 at a time in decode
    batches in `decode`'s tiles, differ from the chunk's rows in `config`'s prefill tiles."""
    req = random_request(context + 2048, 2048, q_heads, kv_heads, head_dim, seed=context, dtype=torch.bfloat16,
                         device="cuda")
    kwargs = dict(scale=head_dim ** -0.5, sliding_window=window, path="split")
    prefilled = run_paged_batch(build_paged_batch([req], page_size=64, seed=1), config, **kwargs)[0]
    differ = 0
    for first in range(0, req.q_len, 16):
        batch = build_paged_batch([req.chunk(i, i + 1) for i in range(first, first + 16)], page_size=64, seed=first)
        rows = torch.cat(run_paged_batch(batch, decode, **kwargs))
        differ += sum(not bitwise_equal(prefilled[first + i], rows[i]) for i in range(16))
    return differ
