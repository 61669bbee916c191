"""Batch-invariant RMSNorm / fused residual-add + RMSNorm (plain and Gemma (1 + w) weights)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vosti_plugin.ops import rmsnorm

# hidden of the tiny CPU model, qk-norm head dims, Gemma-like 2560, and one wider than a chunk
HIDDEN = [128, 64, 256, 344, 2560, 9000]
row_counts = st.one_of(st.integers(1, 16), st.integers(17, 512), st.sampled_from([1, 2, 63, 64, 65, 512]))


def _inputs(seed, M, H):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(M, H, generator=g) * 3, torch.randn(M, H, generator=g),
            torch.randn(H, generator=g) * 0.5 + 1)


def _norm(kind, x, r, w):
    if kind == "rms":
        return (rmsnorm.rms_norm(x, w, 1e-6),)
    if kind == "gemma":
        return (rmsnorm.rms_norm(x, w, 1e-6, gemma=True),)
    if kind == "no_weight":
        return (rmsnorm.rms_norm(x, None, 1e-6),)
    if kind == "fused":
        return rmsnorm.fused_add_rms_norm(x, r, w, 1e-6)
    return rmsnorm.fused_add_rms_norm(x, r, w, 1e-6, gemma=True)


KINDS = ["rms", "gemma", "no_weight", "fused", "fused_gemma"]


@settings(max_examples=15)
@given(kind=st.sampled_from(KINDS), M=row_counts, H=st.sampled_from(HIDDEN), seed=st.integers(0, 2**31 - 1),
       data=st.data())
def test_rmsnorm_row_equals_single_row_result(kind, M, H, seed, data):
    x, r, w = _inputs(seed, M, H)
    full = _norm(kind, x, r, w)
    for row in sorted({0, M - 1, data.draw(st.integers(0, M - 1))}):
        single = _norm(kind, x[row : row + 1].clone(), r[row : row + 1].clone(), w)
        for f, s in zip(full, single):
            assert torch.equal(f[row].view(torch.int32), s[0].view(torch.int32)), f"{kind} row {row} of {M}"


@settings(max_examples=6)
@given(T=st.integers(1, 40), seed=st.integers(0, 2**31 - 1), gemma=st.booleans())
def test_qk_norm_on_strided_head_view_equals_single_token(T, seed, gemma):
    """Qwen3 / Gemma-3 qk-norm: RMSNorm over head_dim of a strided slice of the fused qkv output."""
    heads, kv_heads, D = 4, 2, 64
    qkv = torch.randn(T, (heads + 2 * kv_heads) * D, generator=torch.Generator().manual_seed(seed))
    q = qkv[:, : heads * D].view(T, heads, D)
    w = torch.randn(D)
    full = rmsnorm.rms_norm(q, w, 1e-6, gemma=gemma)
    assert full.shape == q.shape
    t = T // 2
    single = rmsnorm.rms_norm(q[t : t + 1], w, 1e-6, gemma=gemma)
    assert torch.equal(full[t], single[0])


class _AtenCalls(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("gemma", [False, True])
def test_qk_norm_reads_the_strided_heads_in_place(gemma):
    """The q/k split of a fused qkv output, unflattened into heads, is normed where it lies: the launcher runs
    no copy for it that it does not run for a contiguous input (on the GPU every copy is one more kernel per
    norm per layer; the interpreter's own argument copies are the same for both), and each head's row equals
    the row normed from a contiguous copy, bit for bit."""
    T, heads, kv_heads, D = 5, 8, 4, 64
    qkv = torch.randn(T, (heads + 2 * kv_heads) * D, generator=torch.Generator().manual_seed(3))
    q, k, _v = qkv.split([heads * D, kv_heads * D, kv_heads * D], dim=-1)
    w = torch.randn(D)
    for part, n in ((q, heads), (k, kv_heads)):
        view = part.unflatten(-1, (n, D))
        assert not view.is_contiguous()
        assert rmsnorm.row_view(view).data_ptr() == view.data_ptr()
        copies = []
        for x in (view, view.contiguous()):
            with _AtenCalls() as calls:
                got = rmsnorm.rms_norm(x, w, 1e-6, gemma=gemma)
            copies.append([c for c in calls.names if c in ("clone", "copy_", "_to_copy", "_reshape_copy")])
        assert copies[0] == copies[1], copies
        assert torch.equal(got, rmsnorm.rms_norm(view.contiguous(), w, 1e-6, gemma=gemma))
        assert torch.equal(got.flatten(-2), rmsnorm.rms_norm(view.contiguous().view(T * n, D), w, 1e-6,
                                                             gemma=gemma).view(T, n * D))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_gpu_norms_read_the_weight_in_its_own_dtype(dtype):
    """On the GPU the kernel widens the weight to fp32 itself (exactly), so the launcher hands it over as it
    is: an fp32 copy per call would be one more kernel for every Gemma norm of every layer."""
    w = torch.randn(256).to(dtype)
    assert rmsnorm.kernel_weight(w, cpu=False) is w
    assert rmsnorm.kernel_weight(w, cpu=True).dtype == torch.float32


def _reference(x, r, w, kind, eps=1e-6):
    z = x.double() + (r.double() if kind.startswith("fused") else 0)
    y = z / torch.sqrt((z * z).mean(-1, keepdim=True) + eps)
    if kind in ("gemma", "fused_gemma"):
        return y * (1 + w.double()), z
    if kind == "no_weight":
        return y, z
    return y * w.double(), z


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("H", HIDDEN)
def test_rmsnorm_matches_fp64_reference(kind, H):
    # fp32 statistics over H elements: relative error of the normalized value is a few ulps
    # (sum of squares ~ H * 2^-24 relative, halved by the sqrt) -> tolerance 1e-6 * (1 + H * 2^-24 * 8)
    # relative to |y| plus 1e-6 absolute.
    x, r, w = _inputs(5, 33, H)
    got = _norm(kind, x, r, w)
    y_ref, z_ref = _reference(x, r, w, kind)
    tol = 1e-6 * (1 + 8 * H * 2.0**-24) * y_ref.abs() + 1e-6
    assert ((got[0].double() - y_ref).abs() <= tol).all(), (got[0].double() - y_ref).abs().max()
    if kind.startswith("fused"):
        assert torch.equal(got[1], (x + r)), "residual out must be the fp32 sum x + residual"


def test_inputs_are_not_modified():
    x, r, w = _inputs(1, 5, 128)
    x0, r0 = x.clone(), r.clone()
    rmsnorm.fused_add_rms_norm(x, r, w, 1e-6)
    assert torch.equal(x, x0) and torch.equal(r, r0)


def test_config_is_a_function_of_hidden_only():
    assert rmsnorm.select_config(4096) == rmsnorm.select_config(4096)
    assert rmsnorm.select_config(2560).block == 4096
    assert rmsnorm.select_config(128).block == 128


@settings(max_examples=12)
@given(M=row_counts, H=st.sampled_from(HIDDEN), gemma=st.booleans(), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_norm_add_norm_is_the_two_launches_bit_for_bit_and_row_invariant(M, H, gemma, seed, data):
    """Gemma's post-attention norm and pre-feedforward residual-add norm in one launch: the outputs and the
    residual equal the unfused pair's, and a row equals the row computed alone."""
    x, r, w = _inputs(seed, M, H)
    w0 = torch.randn(H, generator=torch.Generator().manual_seed(seed + 1)) * 0.5 + 1
    y, res = rmsnorm.norm_add_rms_norm(x, w0, 1e-6, r, w, 1e-5, gemma=gemma)
    y_pair, res_pair = rmsnorm.fused_add_rms_norm(rmsnorm.rms_norm(x, w0, 1e-6, gemma=gemma), r, w, 1e-5, gemma=gemma)
    assert torch.equal(y.view(torch.int32), y_pair.view(torch.int32))
    assert torch.equal(res.view(torch.int32), res_pair.view(torch.int32))
    row = data.draw(st.integers(0, M - 1))
    y1, res1 = rmsnorm.norm_add_rms_norm(x[row:row + 1], w0, 1e-6, r[row:row + 1], w, 1e-5, gemma=gemma)
    assert torch.equal(y[row], y1[0]) and torch.equal(res[row], res1[0])


def test_norm_add_norm_refuses_mismatched_shapes():
    x, r, w = _inputs(2, 3, 64)
    with pytest.raises(ValueError, match="weight0"):
        rmsnorm.norm_add_rms_norm(x, torch.ones(32), 1e-6, r, w, 1e-6)
    with pytest.raises(ValueError, match="residual"):
        rmsnorm.norm_add_rms_norm(x, w, 1e-6, r[:2], w, 1e-6)


@pytest.mark.parametrize("gemma", [False, True])
def test_qk_norm_in_one_launch_is_the_two_norms_bit_for_bit(gemma):
    """Qwen3 / Gemma-3 q and k norms in one launch over the q and k heads of the qkv output (read in place):
    each head takes its own norm's weight, and the bits are the two launches'."""
    T, hq, hkv, D = 6, 8, 2, 64
    g = torch.Generator().manual_seed(9)
    qkv = torch.randn(T, (hq + 2 * hkv) * D, generator=g)
    wq, wk = torch.randn(D, generator=g), torch.randn(D, generator=g)
    heads = qkv[:, : (hq + hkv) * D].unflatten(-1, (hq + hkv, D))
    both = rmsnorm.qk_rms_norm(heads, wq, wk, hq, 1e-6, gemma)
    assert torch.equal(both[:, :hq], rmsnorm.rms_norm(qkv[:, : hq * D].unflatten(-1, (hq, D)), wq, 1e-6, gemma))
    assert torch.equal(both[:, hq:], rmsnorm.rms_norm(qkv[:, hq * D: (hq + hkv) * D].unflatten(-1, (hkv, D)), wk,
                                                      1e-6, gemma))
    assert torch.equal(both[2], rmsnorm.qk_rms_norm(heads[2:3], wq, wk, hq, 1e-6, gemma)[0])
    with pytest.raises(ValueError, match="num_q_heads"):
        rmsnorm.qk_rms_norm(heads, wq, wk, hq + hkv, 1e-6, gemma)
