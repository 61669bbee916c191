"""Kernels for tests/test_verifier_fed.py: one launch reading what another stored (`fed(...)` preconditions).

COMPUTE mode sums chunk j of a row (acc) and folds it, total = total * 0.5 + acc; PROBE also stores acc to
w[row, j]. FOLD mode loads acc from w[row, j] instead (REVERSE: from w[row, NJ - 1 - j]). SCALE: the probe
stores 2 * acc, a value other than the one folded.
"""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

_PARAMS = {"x_ptr": tensor(("M", "K"), ("K", 1)), "w_ptr": tensor(("M", "NJ"), ("NJ", 1)),
           "o_ptr": tensor(("M",), (1,))}
_PRE = ("0 <= x < L.M", "0 <= y < R.M", "NJ * CHUNK == K", "L.x_ptr[x, :] == R.x_ptr[y, :]")
_BOUNDS = ("L.M * K < 2147483648", "L.M * NJ < 2147483648")


def _goal(name: str, fed: tuple[str, ...]):
    return goal(name, same=("K", "NJ"), across=("FOLD", "PROBE", "REVERSE", "SCALE"), pre=_PRE + fed,
                post=("L.o_ptr[x] == R.o_ptr[y]",), witness={"L": {"pid0": "x"}, "R": {"pid0": "y"}})


@contract(params=_PARAMS, grid=("M",), bounds=_BOUNDS, verif=[
    _goal("fold_of_stored", ("forall(j, 0 <= j < NJ, fed(L.w_ptr[x, j], R.w_ptr[y, j]))",)),
    _goal("fold_without_fed", ()),
])
@triton.jit
def fold_kernel(x_ptr, w_ptr, o_ptr, M, K, NJ, FOLD: tl.constexpr, PROBE: tl.constexpr, REVERSE: tl.constexpr,
                SCALE: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    total = tl.zeros([1], dtype=tl.float32)
    for j in range(0, NJ):
        if FOLD:
            if REVERSE:
                acc = tl.load(w_ptr + row * NJ + (NJ - 1 - j) + tl.zeros([1], dtype=tl.int32))
            else:
                acc = tl.load(w_ptr + row * NJ + j + tl.zeros([1], dtype=tl.int32))
        else:
            cols = j * CHUNK + tl.arange(0, CHUNK)
            acc = tl.sum(tl.load(x_ptr + row * K + cols), axis=0) + tl.zeros([1], dtype=tl.float32)
            if PROBE:
                if SCALE:
                    tl.store(w_ptr + row * NJ + j + tl.zeros([1], dtype=tl.int32), acc * 2.0)
                else:
                    tl.store(w_ptr + row * NJ + j + tl.zeros([1], dtype=tl.int32), acc)
        total = total * 0.5 + acc
    tl.store(o_ptr + row + tl.zeros([1], dtype=tl.int32), total)
