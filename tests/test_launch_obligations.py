"""Each built-in launch obligation holds for a supported launch and fails, by name, when violated."""
import dataclasses

import pytest

from vosti_plugin.launch.check import plugin_manager, run_check
from vosti_plugin.launch.facts import LaunchFacts
from vosti_plugin.launch.hookspecs import hookimpl
from vosti_plugin.launch.obligations import Failure
from vosti_plugin.scheduler import VostiScheduler


class SyncOnlyScheduler(VostiScheduler):
    pass


GOOD = LaunchFacts(
    model="tiny", architecture="LlamaForCausalLM", dtype="float32", head_size=32, num_q_heads=4,
    num_kv_heads=2, num_layers=2, hidden_size=128, intermediate_size=256, vocab_size=512,
    sliding_window=None, page_size=32, max_model_len=1024, max_num_batched_tokens=64, max_num_seqs=8,
    num_gpu_blocks=1000, platform="cpu", scheduler_cls="vosti_plugin.scheduler.VostiScheduler",
)

VIOLATIONS = {
    "attention-geometry": dict(head_size=48),
    "page-size": dict(page_size=16),
    "dtype": dict(dtype="bfloat16"),
    "kv-cache-dtype": dict(kv_cache_dtype="fp8"),
    "slot-index-int32": dict(num_gpu_blocks=2**31 // 32 + 1),
    "token-offset-int32": dict(max_num_batched_tokens=2**31 // (4 * 32) + 1),
    "no-speculative-decoding": dict(speculative=True),
    # a VostiScheduler subclass (so vosti-scheduler holds) that is not VostiAsyncScheduler
    "async-scheduler": dict(async_scheduling=True, scheduler_cls=f"{__name__}.SyncOnlyScheduler"),
    "no-cascade-attention": dict(cascade_attention=True),
    "no-lora": dict(lora=True),
    "no-kv-transfer": dict(kv_transfer=True),
    "no-pipeline-or-data-parallel": dict(pipeline_parallel=2),
    "tp-collectives": dict(tensor_parallel=2, tp_collective="stock all-reduce"),
    "no-weight-quantization": dict(quantization="awq"),
    "no-autotuning": dict(autotune=True),
    "vosti-scheduler": dict(scheduler_cls="vllm.v1.core.sched.scheduler.Scheduler"),
    "text-only-inputs": dict(multimodal_inputs=True),
    "causal-text-attention": dict(prefix_lm_attention=True),
}


def test_supported_launch_meets_every_obligation():
    assert run_check(GOOD) == []


@pytest.mark.parametrize("scheduler_cls", ["vosti_plugin.scheduler.VostiScheduler",
                                           "vosti_plugin.scheduler.VostiAsyncScheduler"])
def test_async_scheduling_with_vosti_scheduler_meets_every_obligation(scheduler_cls):
    facts = dataclasses.replace(GOOD, async_scheduling=True, scheduler_cls=scheduler_cls)
    assert run_check(facts) == []


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_violated_obligation_is_named(name):
    failures = run_check(dataclasses.replace(GOOD, **VIOLATIONS[name]))
    assert name in {f.obligation for f in failures}, failures
    assert all(f.fix for f in failures)


def test_third_party_rule_can_veto():
    class NoLongContext:
        @hookimpl
        def vosti_check_launch(self, facts, failures):
            if facts.max_model_len > 512:
                return [Failure("site-max-len", "too long", "shorter")]

    failures = run_check(GOOD, plugin_manager(extra_plugins=[NoLongContext()]))
    assert [f.obligation for f in failures] == ["site-max-len"]


def test_a_launch_without_stored_proofs_proves_only_what_it_launches(tmp_path, monkeypatch):
    """No stored verification: the launch proves its own attention config's groups and every other family's,
    not the catalog's other attention configs (most of its proof time), logs each finished proof, and stores
    them in the catalog's cache. Proofs already in the per-proof cache are carried over except this launch's
    combine-kernel groups, so the on-demand path proves something here without a long cold run."""
    import logging
    import shutil

    from vosti_plugin.launch import verified
    from vosti_plugin.launch.log import LOGGER_NAME
    from vosti_plugin.verifier.api import cached_results, catalog_plan, default_cache_dir

    stored = default_cache_dir()
    monkeypatch.setenv("VOSTI_CACHE_DIR", str(tmp_path))
    cache = default_cache_dir()
    cache.mkdir(parents=True)
    needed, _ = catalog_plan(wanted=verified.wanted_configs(GOOD))
    every, _ = catalog_plan()
    needed_keys = {g.cache_key for g in needed}
    other_attention = [g for g in every if g.family == "paged_attention" and g.cache_key not in needed_keys]
    assert len(other_attention) >= 20 and {g.family for g in needed} == {g.family for g in every}
    fresh = [g for g in needed if g.kernel == "_combine_segments_kernel"]
    assert fresh
    for g in needed:
        if g not in fresh and (stored / f"{g.cache_key}.json").exists():
            shutil.copy(stored / f"{g.cache_key}.json", cache)
    to_prove = sum(1 for g in needed if not (cache / f"{g.cache_key}.json").exists())

    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger(LOGGER_NAME)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        verified._proof_views.clear()
        assert verified.unverified_configs(GOOD) == []
        proofs = [line for line in lines if line.startswith("vosti: proof ")]
        assert len(proofs) == to_prove and all(": proved in " in line for line in proofs), lines
        assert all((cache / f"{g.cache_key}.json").exists() for g in needed)
        assert not any((cache / f"{g.cache_key}.json").exists() for g in other_attention)
        assert cached_results() is None, "the launch proved the whole catalog"
        assert len(list(cache.glob("launch-*.json"))) == 1
        lines.clear()
        verified._proof_views.clear()   # as a new process would: the stored rows of this launch are read
        assert verified.unverified_configs(GOOD) == [] and not lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        verified._proof_views.clear()


def test_tall_gemm_configs_join_the_checked_launch_set_only_when_turned_on(monkeypatch):
    from vosti_plugin.launch.verified import kernel_configs_for, unverified_configs

    monkeypatch.delenv("VOSTI_TALL_GEMM", raising=False)
    assert GOOD.dtype == "float32"   # the tall path is off by default for fp32 deployments
    assert not any(name.endswith("/tall") for name in kernel_configs_for(GOOD))
    monkeypatch.setenv("VOSTI_TALL_GEMM", "1")
    tall = [name for name in kernel_configs_for(GOOD) if name.endswith("/tall")]
    assert len(tall) == 5
    assert unverified_configs(GOOD) == []


def test_tensor_parallel_with_the_fixed_order_all_reduce_meets_every_obligation():
    from vosti_plugin.parallel.fixed_order import COLLECTIVE

    tp2 = dataclasses.replace(GOOD, tensor_parallel=2, tp_collective=COLLECTIVE)
    assert run_check(tp2) == []
    fused = run_check(dataclasses.replace(tp2, collective_passes=("fuse_allreduce_rms",)))
    assert [f.obligation for f in fused] == ["tp-collectives"] and "fuse_allreduce_rms" in fused[0].reason


def test_tensor_parallel_shards_the_linear_shapes():
    from vosti_plugin.launch.verified import linear_shapes

    # vLLM's facts carry per-rank head counts; the MLP and the padded vocab are split here
    one = linear_shapes(dataclasses.replace(GOOD, intermediate_size=512, vocab_size=1000))
    two = linear_shapes(dataclasses.replace(GOOD, intermediate_size=512, vocab_size=1000, tensor_parallel=2))
    assert two["gate_up_proj"] == (one["gate_up_proj"][0] // 2, one["gate_up_proj"][1])
    assert two["down_proj"] == (one["down_proj"][0], one["down_proj"][1] // 2)
    assert two["lm_head"] == (1024 // 2, one["lm_head"][1])
    assert two["qkv_proj"] == one["qkv_proj"] and two["o_proj"] == one["o_proj"]


def test_prefix_lm_layers_follow_from_image_inputs_only_where_vosti_serves_the_text_tower():
    """A multimodal prefix LM launched with images: with a text-tower loader (Gemma-3), --language-model-only
    fixes both (the text tower has causal layers), so one cause is listed with the other beneath it; without
    one, the prefix-LM layers stay after that fix and are a cause of their own."""
    shipped = dict(architecture="Gemma3ForConditionalGeneration", multimodal_inputs=True, prefix_lm_attention=True)
    with_loader = run_check(dataclasses.replace(GOOD, text_tower_loader=True, **shipped))
    assert [f.obligation for f in with_loader] == ["text-only-inputs"]
    assert [d.obligation for d in with_loader[0].derived] == ["causal-text-attention"]
    without = run_check(dataclasses.replace(GOOD, **shipped))
    assert [f.obligation for f in without] == ["text-only-inputs", "causal-text-attention"]
    assert "text-tower loader" in without[1].fix and "bidirectional" in without[1].reason
