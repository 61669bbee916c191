"""The harness's bitwise comparison: evidence survives JSON exactly and one ulp is a mismatch."""
import json
import math

from hypothesis import given, strategies as st

from vosti_plugin.integration.harness.compare import compare_pair, tally
from vosti_plugin.integration.harness.scale import CPU, GPU
from vosti_plugin.integration.harness.views import decode, encode
from vosti_plugin.integration.evidence import StepLogits

finite = st.floats(allow_nan=False, allow_infinity=True, width=32)
steps = st.lists(st.tuples(st.integers(0, 511), st.lists(st.tuples(st.integers(0, 511), finite), min_size=1,
                                                          max_size=20)), min_size=1, max_size=6)


def _view(raw):
    return tuple(StepLogits(tok, tuple(top)) for tok, top in raw)


def _pair(a, b, run=True):
    return {"class": "batch", "case": "c", "reference": encode(a), "variant": encode(b), "meta": {},
            "run": run, "not_run_reason": None if run else "no cache hit"}


@given(steps)
def test_evidence_round_trips_through_json_bit_for_bit(raw):
    view = _view(raw)
    back = decode(json.loads(json.dumps(encode(view))))
    assert [(s.token_id, [(t, v.hex()) for t, v in s.top]) for s in back] == \
           [(s.token_id, [(t, v.hex()) for t, v in s.top]) for s in view]
    assert compare_pair(_pair(view, back)).match is True


@given(steps, st.data())
def test_one_ulp_in_any_logit_is_a_mismatch(raw, data):
    view = _view(raw)
    i = data.draw(st.integers(0, len(view) - 1))
    j = data.draw(st.integers(0, len(view[i].top) - 1))
    tid, v = view[i].top[j]
    bumped = math.nextafter(v, math.inf) if v != math.inf else math.nextafter(v, 0.0)
    top = list(view[i].top)
    top[j] = (tid, bumped)
    other = view[:i] + (StepLogits(view[i].token_id, tuple(top)),) + view[i + 1:]
    result = compare_pair(_pair(view, other))
    assert result.match is False
    assert result.first_divergence == i


def test_shorter_view_is_a_mismatch_and_not_run_cases_are_not_counted():
    a = _view([(1, [(1, 2.0)]), (3, [(3, 1.0)])])
    rows = [compare_pair(_pair(a, a[:1])), compare_pair(_pair(a, a)), compare_pair(_pair(a, a, run=False))]
    assert [r.match for r in rows] == [False, True, None]
    t = tally(rows)["batch"]
    assert (t.matches, t.compared, t.not_run) == (1, 2, 1)


def test_gpu_scale_has_the_paper_sizes_and_cpu_scale_every_class():
    assert GPU.planned == {"batch": 288, "chunk": 90, "prefill_decode": 384, "prefix": 14}
    assert all(n > 0 for n in CPU.planned.values())
    assert max(CPU.batch_lengths + CPU.chunk_lengths + CPU.pd_lengths + CPU.prefix_lengths) <= 300


def test_chunk_neighbour_leaves_every_planned_prompt_split_across_steps():
    from vosti_plugin.integration.harness.classes import neighbour_length

    for scale in (CPU, GPU):
        for n in scale.chunk_lengths:
            for budget in scale.chunk_budgets:
                neighbour = neighbour_length(n, budget)
                first_chunk = budget - neighbour
                assert 1 <= neighbour < budget
                assert 1 <= first_chunk < n, (n, budget, first_chunk)
                assert first_chunk <= budget - budget // 2 - 3
