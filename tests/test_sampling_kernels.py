"""vosti's top-k / top-p Triton kernel (vosti_plugin/sampling/top_k_top_p.py, through the interpreter in
fp32): bitwise the torch reference's decisions (rowwise.reference_top_k_top_p: sort + int64 cumsum), a
row alone equals the row in a batch, and the verifier proves the row-invariance contract (and rejects a
kernel that reads another row's k)."""
from __future__ import annotations

import importlib.util
import inspect

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vosti_plugin.sampling import rowwise, top_k_top_p
from vosti_plugin.verifier.api import verify_kernel


def _logits(seed: int, rows: int, vocab: int, kind: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, vocab, generator=g) * 3
    if kind == "ties":
        x = (x * 2).round() / 2
    if kind == "wide":   # exponents from denormals to 2**100, both zeros, -inf (an earlier mask)
        e = torch.randint(-150, 100, (rows, vocab), generator=g).float()
        x = torch.sign(torch.randn(rows, vocab, generator=g)) * torch.exp2(e) * torch.rand(rows, vocab, generator=g)
        x[:, :3] = torch.tensor([-0.0, 0.0, float("-inf")])
    return x


def _params(seed: int, rows: int, vocab: int):
    g = torch.Generator().manual_seed(seed + 1)
    k = torch.randint(1, vocab + 1, (rows,), generator=g)
    k[torch.rand(rows, generator=g) < 0.3] = vocab + 3   # rows without top-k
    p = torch.rand(rows, generator=g) * 0.95 + 0.02
    p[torch.rand(rows, generator=g) < 0.3] = 1.0   # rows without top-p
    return k, p


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.float().contiguous().view(torch.int32)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 4), vocab=st.integers(3, 200),
       kind=st.sampled_from(["plain", "ties", "wide"]), which=st.sampled_from(["k", "p", "kp"]))
def test_kernel_equals_reference_bitwise(seed, rows, vocab, kind, which):
    x = _logits(seed, rows, vocab, kind)
    k, p = _params(seed, rows, vocab)
    k, p = (k if "k" in which else None), (p if "p" in which else None)
    got = top_k_top_p.top_k_top_p(x.clone(), k, p)
    want = rowwise.reference_top_k_top_p(x.clone(), k, p)
    assert torch.equal(_bits(got), _bits(want))


def test_kernel_row_alone_equals_row_in_batch():
    x = _logits(3, 6, 150, "ties")
    k, p = _params(3, 6, 150)
    batch = top_k_top_p.top_k_top_p(x.clone(), k, p)
    for r in range(6):
        alone = top_k_top_p.top_k_top_p(x[r : r + 1].clone(), k[r : r + 1], p[r : r + 1])
        assert torch.equal(_bits(batch[r : r + 1]), _bits(alone)), r


def test_kernel_keeps_ties_at_both_cuts_and_the_largest_token():
    row = torch.tensor([[0.0, 5.0, 5.0, 1.0, 5.0, 1.0]])
    top_k = top_k_top_p.top_k_top_p(row.clone(), torch.tensor([2]), None)
    assert torch.isfinite(top_k[0]).tolist() == [False, True, True, False, True, False]
    top_p = top_k_top_p.top_k_top_p(row.clone(), None, torch.tensor([0.01]))
    assert torch.isfinite(top_p[0]).tolist() == [False, True, True, False, True, False]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_kernel_masks_low_precision_logits_in_their_own_dtype(dtype):
    x = _logits(5, 3, 64, "plain").to(dtype)
    k, p = _params(5, 3, 64)
    got = top_k_top_p.top_k_top_p(x.clone(), k, p)
    assert got.dtype == dtype
    assert torch.equal(got, rowwise.reference_top_k_top_p(x.clone(), k, p))


def test_verifier_proves_row_invariance_for_every_mode():
    entry = top_k_top_p.verifier_catalog()[0]
    seen = set()
    for config, _family in entry["configs"]:
        mode = (config["HAS_K"], config["HAS_P"])
        if mode in seen:
            continue
        seen.add(mode)
        report = verify_kernel(entry["kernel"], config=config)
        assert report.status == "proved", str(report)
    assert seen == {(True, False), (False, True), (True, True)}


def test_verifier_rejects_a_kernel_that_reads_another_rows_k(tmp_path):
    source = inspect.getsource(top_k_top_p)
    assert "k = tl.load(k_ptr + row)" in source
    mutant = tmp_path / "top_k_top_p_mutant.py"
    mutant.write_text(source.replace("k = tl.load(k_ptr + row)", "k = tl.load(k_ptr)"))
    spec = importlib.util.spec_from_file_location("top_k_top_p_mutant", mutant)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = {"BLOCK": 64, "HAS_K": True, "HAS_P": False}
    report = verify_kernel(module.top_k_top_p_kernel, config=config)
    assert report.status == "failed", str(report)


def test_launch_guard_passes_proved_configs_and_refuses_an_unproved_mode():
    from vosti_plugin.launch import guard
    from vosti_plugin.verifier.report import Result

    entry = top_k_top_p.verifier_catalog()[0]
    rows = [Result("top_k_top_p_kernel", cfg, "row_invariance", "proved", "", 0, "", 0.0)
            for cfg, _ in entry["configs"] if cfg["HAS_P"]]   # top-k alone left unproved
    rows.append(Result("launch:top_k_top_p", {}, "launches_match_proofs", "proved", "", 0, "", 0.0))
    try:
        guard.arm(rows)
        x = _logits(1, 2, 40, "plain")
        top_k_top_p.top_k_top_p(x.clone(), torch.tensor([3, 5]), torch.tensor([0.5, 1.0]))
        top_k_top_p.top_k_top_p(x.clone(), None, torch.tensor([0.5, 1.0]))
        before = x.clone()
        with pytest.raises(guard.UnprovedLaunch, match="top_k_top_p_kernel"):
            top_k_top_p.top_k_top_p(x, torch.tensor([3, 5]), None)
        assert torch.equal(x, before)
    finally:
        guard.disarm()
