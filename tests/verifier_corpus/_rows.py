"""Shared contract of the small row-wise corpus kernels: row r of an M-row launch equals the one-row launch's
row whenever their x rows are equal (the batch-invariance contract of every dense op)."""
from vosti_plugin.verifier.contracts import goal, tensor

PARAMS = {"x": tensor(("M", "N"), ("sx", 1)), "y": tensor(("M", "N"), ("sy", 1))}
ROW = goal("row_invariance", same=("N",), pre=("R.M == 1", "0 <= r < L.M", "L.x[r, :] == R.x[0, :]"),
           post=("L.y[r, :] == R.y[0, :]",))
GRID = ("M",)
CONFIGS = [{"BLOCK": 64}]
