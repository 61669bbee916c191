"""The fused attention path against the split path and its fold, proved on a test variant of the shipped
kernel (its source with the constexprs of `vosti_plugin.integration.attention_lever` added; built here from the
shipped file, so it follows every change to it), with real Z3:

  * FOLD: each segment's partial is loaded from the workspace instead of computed (the tile loop is skipped),
    then folded by the fused branch's own fold (what the split path's combine would become);
  * PROBE: the fused branch also stores each segment's partial to the workspace.

Proved: (a) the probe stores equal the split path's partials (64-row split launch against 64- and 128-row
fused launches); (b) the fused output equals the FOLD output on what the fused launch stored there
(`fed(...)`); (c) removing the probe stores changes no output. With FOLD as the split path's combine, (a)-(c)
chain to "a fused prefill row equals the split decode row". A third constexpr, INTERIOR, lets the fused launch
skip the causal/window and liveness selects on key tiles every valid row of its block sees whole: (d) such a
launch (64 or 128 rows) gives every row of the masked 64-row launch, and (a)-(b) hold for it too; interior
bounds one row too loose fail. Production does not ship FOLD or INTERIOR yet: it still proves each path
separately and runs one per deployment (docs/design.md)."""
import dataclasses
import importlib.util
import sys

import pytest

from vosti_plugin.integration import attention_lever as lever
from vosti_plugin.verifier.check import check_goal
from vosti_plugin.verifier.contracts import contract_of
from vosti_plugin.verifier.frontend import kernel_from_function

CONFIG = {"HEAD_DIM": 128, "HEAD_DIM_PAD": 128, "PAGE_SIZE": 64, "QUERIES_PER_KV": 4, "GROUP": 4, "BLOCK_Q": 16,
          "BLOCK_M": 64, "BLOCK_N": 64, "SEGMENT": 512, "SEQ_SCAN_CHUNK": 128, "DOT_PRECISION": "tf32", "ROW_SUMS_BY_DOT": False,
          "USE_SOFT_CAP": False, "USE_WINDOW": True, "FUSED": True, "PROBE": True, "FOLD": False,
          "INTERIOR": False}
ROWS_128 = {"BLOCK_Q": 32, "BLOCK_M": 128}
ROWS_16 = {"BLOCK_Q": 4, "BLOCK_M": 16}   # a FOLD launch that folds one decode token's heads per program


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    return _build(tmp_path_factory, "fold_variant_kernel", lever.INTERIOR_BOUNDS)


# Wrong interior bounds: the block's last row instead of its first (keys past the earlier rows go unmasked),
# and the first row's window start instead of the last row's (keys before the later rows' windows).
_WRONG_BOUNDS = {
    "past-first-row": lever.INTERIOR_BOUNDS.replace("interior_hi = context_len + first_local_token",
                                                    "interior_hi = last_pos"),
    "before-last-window": lever.INTERIOR_BOUNDS.replace("interior_lo = tl.maximum(last_pos - window + 1, 0)",
                                                        "interior_lo = first_key"),
}


@pytest.fixture(scope="module", params=sorted(_WRONG_BOUNDS))
def wrong_variant(request, tmp_path_factory):
    assert _WRONG_BOUNDS[request.param] != lever.INTERIOR_BOUNDS
    return _build(tmp_path_factory, f"wrong_interior_{request.param.replace('-', '_')}", _WRONG_BOUNDS[request.param])


def _build(tmp_path_factory, name: str, bounds: str):
    s = lever.apply(lever.SHIPPED.read_text(), lever.kernel_edits(bounds))
    path = tmp_path_factory.mktemp("variant") / f"{name}.py"
    path.write_text(s)
    spec_ = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec_)
    sys.modules[name] = mod
    spec_.loader.exec_module(mod)
    kernel = mod._paged_attention_segments_kernel
    spec = contract_of(kernel)
    # the probe writes every segment of the block's rows: the workspace holds each sequence's segments
    bound = "forall(i, 0 <= i < L.num_seqs, L.seq_lens_ptr[i] <= L.num_segments * SEGMENT)"
    spec = dataclasses.replace(spec, bounds=spec.bounds + (bound,))
    setattr(kernel, "__vosti_contract__", spec)
    goals = {g.name: g for g in spec.verif}
    live = "forall(h, 0 <= h < HQ, forall(g, (" + mod._LO + ") // SEGMENT <= g <= p // SEGMENT, {c}))"
    fed = tuple(live.format(c=c) for c in (
        "fed(L.part_m_ptr[x, h, g], R.part_m_ptr[y, h, g])", "fed(L.part_l_ptr[x, h, g], R.part_l_ptr[y, h, g])",
        "forall(d, 0 <= d < HEAD_DIM, fed(L.part_acc_ptr[x, h, g, d], R.part_acc_ptr[y, h, g, d]))"))
    row = goals["causal_row_invariance"]
    split = goals["causal_segment_partials"]
    chain = {
        "fused_equals_fold": dataclasses.replace(row, pre=row.pre + fed,
                                                across=("PROBE", "FOLD", "BLOCK_Q", "BLOCK_M", "INTERIOR")),
        "probe_equals_split": dataclasses.replace(
            split, when="", across=("FUSED", "PROBE", "BLOCK_Q", "BLOCK_M", "INTERIOR"),
            witness=tuple((s_, v, "0" if (s_, v) == ("L", "pid2") else e) for s_, v, e in split.witness)),
        "probe_free": dataclasses.replace(row, across=("PROBE",)),
        "interior_free": dataclasses.replace(row, across=("INTERIOR", "BLOCK_Q", "BLOCK_M")),
    }
    return kernel_from_function(kernel), spec, chain


def _check(variant, goal, left, right):
    ir, spec, chain = variant
    return check_goal(ir, spec, chain[goal], {**CONFIG, **left}, right_config={**CONFIG, **right}, timeout_ms=5000)


@pytest.mark.parametrize("fused_rows", [{}, ROWS_128])
def test_probe_stores_equal_the_split_partials(variant, fused_rows):
    rep = _check(variant, "probe_equals_split", fused_rows, {"FUSED": False, "PROBE": False})
    assert rep.status == "proved", rep.failure


@pytest.mark.parametrize("fold_rows", [{}, ROWS_128, ROWS_16])
def test_fused_output_equals_the_fold_of_what_it_stored(variant, fold_rows):
    rep = _check(variant, "fused_equals_fold", {}, {"PROBE": False, "FOLD": True, **fold_rows})
    assert rep.status == "proved", rep.failure


def test_the_probe_stores_change_no_output(variant):
    assert _check(variant, "probe_free", {}, {"PROBE": False}).status == "proved"


def test_without_probe_stores_the_fold_input_is_not_the_fused_launchs(variant):
    rep = _check(variant, "fused_equals_fold", {"PROBE": False}, {"PROBE": False, "FOLD": True})
    assert rep.status == "failed" and rep.failure.name == "coverage"


INTERIOR_128 = {"INTERIOR": True, **ROWS_128}


@pytest.mark.parametrize("fused", [{"INTERIOR": True}, INTERIOR_128])
def test_interior_tiles_without_selects_change_no_row(variant, fused):
    """A fused launch whose interior tiles skip the selects gives every row of the masked 64-row launch."""
    rep = _check(variant, "interior_free", fused, {})
    assert rep.status == "proved", rep.failure


def test_probe_stores_of_an_interior_launch_equal_the_split_partials(variant):
    rep = _check(variant, "probe_equals_split", INTERIOR_128, {"FUSED": False, "PROBE": False})
    assert rep.status == "proved", rep.failure


def test_interior_fused_output_equals_the_fold_of_what_it_stored(variant):
    rep = _check(variant, "fused_equals_fold", INTERIOR_128, {"PROBE": False, "FOLD": True})
    assert rep.status == "proved", rep.failure


@pytest.mark.parametrize("fused", [{"INTERIOR": True}, INTERIOR_128])
def test_interior_bounds_that_let_a_row_see_an_unmasked_key_fail(wrong_variant, fused):
    rep = _check(wrong_variant, "interior_free", fused, {})
    assert rep.status == "failed", rep
