"""Issue 19: the runtime launch guard under a real vLLM engine. Audit mode (VOSTI_AUDIT=1, set suite-wide by
tests/conftest.py) arms it when the engine's launch check passes; every vosti kernel the forward path
launches was checked by it first (an independent witness records the launches at Triton's `run`), and once
a launched config is taken out of the proved set, the next step raises before that kernel runs, naming
the kernel and its config."""
import gc
import inspect
from collections import Counter

import pytest

pytestmark = pytest.mark.vllm


def _constexpr_names(kernel) -> set[str]:
    """The constexprs the guard keys a launch by: all but the dependent-launch gate, which selects no computation
    (vosti_plugin/ops/dependent_launch.py)."""
    return {n for n, p in inspect.signature(kernel.fn).parameters.items()
            if "constexpr" in str(p.annotation) and n != "PDL"}


@pytest.fixture
def launch_witness(monkeypatch):
    """(kernel name, constexpr config) of every launch of a catalog kernel in this process, counted at
    Triton's `run` (below vosti's wrappers, so a launch that skipped the guard is seen too)."""
    from vosti_plugin.verifier.api import catalog_entries

    launched: Counter = Counter()
    for entry in catalog_entries():
        kernel = entry["kernel"]
        names, run = _constexpr_names(kernel), kernel.run

        def recording(*args, _k=kernel, _names=names, _run=run, **kwargs):
            launched[(_k.fn.__name__, tuple(sorted((n, v) for n, v in kwargs.items() if n in _names)))] += 1
            return _run(*args, **kwargs)

        monkeypatch.setattr(kernel, "run", recording, raising=False)
    return launched


def _chain(exc: BaseException):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def test_guard_checks_every_forward_launch_and_refuses_an_unproved_one(tiny_model_path, launch_witness,
                                                                      monkeypatch):
    from vllm import SamplingParams

    from vosti_plugin.integration.engine_presets import build_llm
    from vosti_plugin.launch import guard
    from vosti_plugin.launch.facts import facts_from_vllm_config
    from vosti_plugin.launch.verified import wanted_configs
    from vosti_plugin.verifier.api import cached_results, verify_configs

    monkeypatch.setenv("VOSTI_AUDIT", "1")
    monkeypatch.delenv(guard.ENV, raising=False)
    guard.disarm()
    llm = build_llm(tiny_model_path, skip_tokenizer_init=True)
    try:
        assert guard.armed(), "audit mode did not arm the launch guard"
        launch_witness.clear()   # startup's profiling run was checked too; look at serving alone
        guard._passed.clear()
        params = SamplingParams(max_tokens=3, temperature=0.0)
        out = llm.generate([{"prompt_token_ids": [5, 6, 7, 8, 9]}], params, use_tqdm=False)
        assert len(out[0].outputs[0].token_ids) == 3

        kernels = {name for name, _ in launch_witness}
        print(f"{sum(launch_witness.values())} launches of {len(launch_witness)} (kernel, config) keys: "
              f"{sorted(kernels)}")
        for needed in ("_paged_attention_segments_kernel", "_write_kv_kernel", "rms_norm_kernel",
                       "act_and_mul_kernel"):
            assert needed in kernels, f"the forward path no longer launches {needed}: update this test"
        assert any(k.startswith("mm_") for k in kernels), kernels
        checked = {(name, tuple(sorted(cfg.items()))) for name, cfg in guard.checked()}
        unchecked = [key for key in launch_witness if key not in checked]
        assert not unchecked, f"launched without passing the guard: {unchecked}"

        attention = next(key for key in launch_witness if key[0] == "_paged_attention_segments_kernel")
        # the proofs audit mode armed this process with: the deployment's own (cached on disk by its start);
        # the whole catalog's where a verification of it is stored
        facts = facts_from_vllm_config(llm.llm_engine.vllm_config)
        rows = [r for r in (cached_results() or verify_configs(wanted_configs(facts)))
                if not (r.kernel == attention[0] and tuple(sorted(r.config.items())) == attention[1])]
        assert len(rows) > 100, f"{len(rows)} proof rows: not the deployment's proved set"
        guard.arm(rows)
        before = launch_witness[attention]
        with pytest.raises(Exception) as info:
            llm.generate([{"prompt_token_ids": [5, 6, 7]}], params, use_tqdm=False)
        refused = next((e for e in _chain(info.value) if isinstance(e, guard.UnprovedLaunch)), None)
        assert refused is not None, f"not refused by the guard: {info.value!r}"
        assert refused.kernel == attention[0] and refused.config == dict(attention[1])
        assert attention[0] in str(refused) and "'BLOCK_Q': " in str(refused), str(refused)
        assert launch_witness[attention] == before, "the refused kernel ran"
    finally:
        guard.disarm()
        del llm
        gc.collect()
