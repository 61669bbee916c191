"""One diagnosis per cause: a refused launch names each root cause once, with a fix that addresses it, and
folds what follows from it underneath; applying the printed fix makes the launch check pass, checked on
the facts and through the offline check (`vosti verify --model`, vLLM's own config from vLLM arguments).
Where no launch argument can help, the refusal says the geometry is not supported yet."""
import dataclasses
import json

import pytest

from vosti_plugin.launch.check import run_check
from vosti_plugin.launch.facts import LaunchFacts
from vosti_plugin.launch.obligations import NOT_SUPPORTED_YET, LaunchRefused, facts_with_fixes

GOOD = LaunchFacts(
    model="tiny", architecture="LlamaForCausalLM", dtype="float32", head_size=32, num_q_heads=4,
    num_kv_heads=2, num_layers=2, hidden_size=128, intermediate_size=256, vocab_size=512,
    sliding_window=None, page_size=32, max_model_len=1024, max_num_batched_tokens=64, max_num_seqs=8,
    num_gpu_blocks=1000, platform="cpu", scheduler_cls="vosti_plugin.scheduler.VostiScheduler",
)

# facts changed -> (causes in order, obligations folded under a cause)
FIXABLE = {
    "page 48": (dict(page_size=48), ["page-size"], {"kernel-configs-verified"}),
    "page 16 under the fp32 tile 32": (dict(page_size=16), ["page-size"], set()),
    "bf16 on CPU": (dict(dtype="bfloat16"), ["dtype"], {"page-size"}),   # every bf16 GEMM config is proved
    "bf16 on CPU and page 48": (dict(dtype="bfloat16", page_size=48), ["dtype", "page-size"],
                                {"kernel-configs-verified"}),
    "stock scheduler under async": (dict(async_scheduling=True, scheduler_cls="vllm.v1.core.sched.scheduler.Scheduler"),
                                    ["vosti-scheduler"], {"async-scheduler"}),
    "token offsets past int32": (dict(max_num_batched_tokens=2**31 // (4 * 32) + 1), ["token-offset-int32"], set()),
    "slot indices past int32": (dict(num_gpu_blocks=2**31 // 32 + 1), ["slot-index-int32"], set()),
}
UNSUPPORTED = {
    "head size 48": dict(head_size=48),
    "6 query heads over 4 KV heads": dict(num_q_heads=6, num_kv_heads=4),
    "more query heads per KV head than the catalog lists": dict(num_q_heads=256, num_kv_heads=2),
}


@pytest.mark.parametrize("case", sorted(FIXABLE))
def test_each_cause_is_named_once_and_its_fix_makes_the_check_pass(case):
    change, expected_causes, expected_derived = FIXABLE[case]
    causes = run_check(dataclasses.replace(GOOD, **change))
    assert [c.obligation for c in causes] == expected_causes, LaunchRefused(causes)
    assert {d.obligation for c in causes for d in c.derived} == expected_derived, LaunchRefused(causes)
    for c in causes:
        assert c.fixed, f"{c.obligation}: a fixable cause must say what its fix changes"
        assert not c.fix.startswith(NOT_SUPPORTED_YET)
        if c.fix_args:
            assert " ".join(c.fix_args) in c.fix, "the printed fix must be the one the test applies"
    assert run_check(facts_with_fixes(dataclasses.replace(GOOD, **change), causes)) == []


@pytest.mark.slow   # proves the attention configs of the page sizes it tries: a minute and a half cold on 2 cores
def test_page_fix_names_a_page_size_that_works_for_this_dtype_and_head_size():
    [cause] = run_check(dataclasses.replace(GOOD, page_size=48))
    assert "multiple of 16" not in cause.fix and "--block-size 64" in cause.fix
    llama_8b = dict(head_size=128, num_q_heads=32, num_kv_heads=8, hidden_size=4096, intermediate_size=14336,
                    vocab_size=128256)
    [cause] = run_check(dataclasses.replace(GOOD, dtype="bfloat16", platform="cuda", page_size=32, **llama_8b))
    assert cause.obligation == "page-size" and "KV tile 64" in cause.reason
    assert cause.fix == "pass --block-size 64", "bf16 tiles are 64 positions: 16 and 32 cannot work"


def test_bf16_on_cpu_is_one_cause_with_the_float32_fix():
    [cause] = run_check(dataclasses.replace(GOOD, dtype="bfloat16"))
    assert cause.fix == "pass --dtype float32"
    message = str(LaunchRefused([cause]))
    assert message.startswith("vosti refused this launch: 1 cause")
    first_fix = message.index("-> fix:")
    assert message.index("follows from it") > first_fix, "root cause and its fix come first"
    assert "--block-size" not in message, "the page size is fine once the dtype is"


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_geometry_without_a_fix_says_so_plainly(case):
    causes = run_check(dataclasses.replace(GOOD, **UNSUPPORTED[case]))
    assert [c.obligation for c in causes] == ["attention-geometry"], LaunchRefused(causes)
    [cause] = causes
    assert cause.fix.startswith(NOT_SUPPORTED_YET) and not cause.fix_args and not cause.fixed
    assert {d.obligation for d in cause.derived} == {"page-size", "kernel-configs-verified"}


# -- through vLLM's own config (offline check, no engine) -------------------------------------------------

OFFLINE = {
    "page 48": (["--dtype", "float32", "--block-size", "48"], ["page-size"]),
    "page 16": (["--dtype", "float32", "--block-size", "16"], ["page-size"]),
    "bf16 on CPU": (["--dtype", "bfloat16", "--block-size", "32"], ["dtype"]),
    "bf16 on CPU and page 48": (["--dtype", "bfloat16", "--block-size", "48"], ["dtype", "page-size"]),
    "token offsets past int32": (["--dtype", "float32", "--max-num-batched-tokens", str(2**31 // 128 + 1)],
                                 ["token-offset-int32"]),
}


def _causes(model, args):
    from vosti_plugin.launch.offline import check_model

    _facts, statuses = check_model(str(model), args)
    return [st for st in statuses if st.cause], statuses


@pytest.mark.vllm
@pytest.mark.parametrize("case", sorted(OFFLINE))
def test_offline_fix_arguments_make_the_launch_check_pass(tiny_model_path, case):
    args, expected = OFFLINE[case]
    causes, _ = _causes(tiny_model_path, args)
    assert [c.name for c in causes] == expected
    fix_args = [a for c in causes for a in c.fix_args]
    assert all(" ".join(c.fix_args) in c.fix for c in causes)
    fixed, statuses = _causes(tiny_model_path, args + fix_args)   # a later --flag wins in vLLM's parser
    assert fixed == [] and all(st.ok for st in statuses), [st for st in statuses if not st.ok]


@pytest.mark.vllm
@pytest.mark.parametrize("geometry,words", [
    (dict(hidden_size=192, num_attention_heads=4, head_dim=48), "head size 48"),
    (dict(hidden_size=192, num_attention_heads=6, num_key_value_heads=4), "6 query heads over 4 KV heads"),
])
def test_offline_unsupported_model_geometry_is_said_plainly(tmp_path, geometry, words):
    from vosti_plugin.integration.tiny_model import GEOMETRY

    (tmp_path / "config.json").write_text(json.dumps(dict(GEOMETRY, **geometry)))
    causes, statuses = _causes(tmp_path, ["--dtype", "float32"])
    assert [c.name for c in causes] == ["attention-geometry"]
    assert causes[0].fix.startswith(NOT_SUPPORTED_YET + words)
    follows = {st.name for st in statuses if not st.ok and not st.cause}
    assert follows <= {"page-size", "kernel-configs-verified"}


def test_a_failure_needing_two_fixes_is_listed_under_the_cause_it_cannot_do_without():
    """bf16 on CPU and head size 512: fixing the dtype alone leaves the page-size and config checks failing
    (no kernel for head size 512), so they are folded under attention-geometry, not under dtype."""
    causes = run_check(dataclasses.replace(GOOD, dtype="bfloat16", head_size=512))
    assert [c.obligation for c in causes] == ["dtype", "attention-geometry"], LaunchRefused(causes)
    dtype, geometry = causes
    assert dtype.derived == ()
    assert {d.obligation for d in geometry.derived} == {"page-size", "kernel-configs-verified"}
    assert all("needs the fix of dtype too" in d.reason for d in geometry.derived)
    # bf16 on CPU and page 48: the unproved-config failure comes from the page size, not from the dtype
    dtype, page = run_check(dataclasses.replace(GOOD, dtype="bfloat16", page_size=48))
    assert dtype.derived == () and [d.obligation for d in page.derived] == ["kernel-configs-verified"]
