"""Negative (integer model): the flat offset token * heads * head_dim is formed in int32 before it meets
the pointer; for a large batch it wraps to another token's row."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "int-overflow"
CONFIGS = [{"DB": 64}]


@contract(
    params={"x": tensor(("T", "H", "D"), ("H*D", "D", 1)), "y": tensor(("T", "H", "D"), ("H*D", "D", 1))},
    grid=("T", "H"),
    verif=[goal("token_invariance", same=("H", "D"), pre=("0 <= t < L.T", "R.T == 1", "D <= DB", "L.x[t, :, :] == R.x[0, :, :]"),
                post=("L.y[t, :, :] == R.y[0, :, :]",))],
)
@triton.jit
def scale_heads_kernel(x, y, T, H, D, DB: tl.constexpr):
    tok = tl.program_id(0)
    head = tl.program_id(1)
    dims = tl.arange(0, DB)
    base = tok * H * D + head * D  # BUG
    v = tl.load(x + base + dims, mask=dims < D, other=0.0)
    tl.store(y + base + dims, 2.0 * v, mask=dims < D)
