"""Shared contract of the per-head corpus kernels over a strided [tokens, heads, H] view (q/k norms read the
heads of a qkv split in place): token r of an M-token launch equals the one-token launch's token, every head."""
from vosti_plugin.verifier.contracts import goal, tensor

PARAMS = {"x": tensor(("M", "NH", "H"), ("sx", "sxh", 1)), "y": tensor(("M", "NH", "H"), ("sy", "syh", 1))}
ROW = goal("row_invariance", same=("H",), pre=("R.M == 1", "0 <= r < L.M", "L.NH == R.NH", "H <= BLOCK",
                                               "L.x[r, :, :] == R.x[0, :, :]"),
           post=("L.y[r, :, :] == R.y[0, :, :]",))
GRID = ("M", "NH")
CONFIGS = [{"BLOCK": 64}]
