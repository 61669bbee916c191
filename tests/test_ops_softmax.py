"""Batch-invariant log_softmax / softmax / mean over the last dim."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vosti_plugin.ops import softmax

VOCAB = [1, 7, 512, 1000, 4096, 5001]  # 5001 > one 4096 chunk
row_counts = st.one_of(st.integers(1, 16), st.integers(17, 512), st.sampled_from([1, 2, 512]))
OPS = {
    "log_softmax": lambda x: softmax.log_softmax(x),
    "softmax": lambda x: softmax.softmax(x),
    "mean": lambda x: softmax.mean_last_dim(x),
}


def _logits(seed, M, V):
    x = torch.randn(M, V, generator=torch.Generator().manual_seed(seed)) * 4
    x[:, ::7] = float("-inf") if V > 1 else x[:, ::7]  # masked vocabulary entries, as top-k leaves them
    return x


@settings(max_examples=15)
@given(op=st.sampled_from(list(OPS)), M=row_counts, V=st.sampled_from(VOCAB), seed=st.integers(0, 2**31 - 1),
       data=st.data())
def test_row_reduction_equals_single_row_result(op, M, V, seed, data):
    x = _logits(seed, M, V)
    if op == "mean":
        x = torch.nan_to_num(x, neginf=-3.0)
    full = OPS[op](x)
    for row in sorted({0, M - 1, data.draw(st.integers(0, M - 1))}):
        single = OPS[op](x[row : row + 1].clone())
        assert torch.equal(full[row].view(torch.int32), single[0].view(torch.int32)), f"{op} row {row} of {M}"


@pytest.mark.parametrize("V", VOCAB)
def test_matches_fp64_reference(V):
    # fp32 exp/log and a V-term fp32 sum: tolerance 4e-6 relative + V * 2^-24 * 4 absolute on log-probs,
    # 1e-6 relative + 1e-9 absolute on probabilities and V * 2^-24 relative on the mean.
    x = _logits(3, 9, V)
    x64 = x.double()
    lsm = softmax.log_softmax(x).double()
    ref = torch.log_softmax(x64, -1)
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(lsm), finite)
    assert ((lsm - ref).abs()[finite] <= 4e-6 * ref.abs()[finite] + V * 2.0**-24 * 4).all()
    sm = softmax.softmax(x).double()
    ref_p = torch.softmax(x64, -1)
    assert ((sm - ref_p).abs() <= 1e-6 * ref_p + 1e-9).all()
    y = torch.nan_to_num(x, neginf=-3.0)
    mean_ref = y.double().mean(-1)
    tol = V * 2.0**-24 * y.double().abs().mean(-1) + 1e-12
    assert ((softmax.mean_last_dim(y).double() - mean_ref).abs() <= tol).all()


def test_output_dtype_and_keepdim():
    x = torch.randn(3, 4, 10)
    assert softmax.log_softmax(x.bfloat16(), dtype=torch.float32).dtype == torch.float32
    assert softmax.mean_last_dim(x, keepdim=True).shape == (3, 4, 1)
    assert softmax.softmax(x).shape == x.shape
