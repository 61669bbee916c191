"""Positive (integer model): the padding slot -1 returns before it is divided; every other slot is
non-negative, where Triton's truncating // and % agree with rounding down."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

CONFIGS = [{"D": 64, "PAGE": 16}]
OBLIGATIONS = {"int-overflow", "store-in-bounds", "write-frame"}


@contract(
    params={"k": tensor(("T", "D"), ("sk", 1)), "cache": tensor(("NB", "PAGE", "D"), ("sb", "sp", 1)),
            "slots": tensor(("T",), (1,), "int64")},
    grid=("T",),
    verif=[goal("writes_only_its_slots",
                post=("forall(t, 0 <= t < L.T and L.slots[t] >= 0, only(L.cache[L.slots[t] // PAGE, "
                      "L.slots[t] % PAGE, :]))",))],
    bounds=("forall(a, 0 <= a < L.T, L.slots[a] < L.NB * PAGE)",),
)
@triton.jit
def write_slots_kernel(k, cache, slots, sk, sb, sp, D: tl.constexpr, PAGE: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slots + t)
    if slot < 0:
        return
    page = slot // PAGE
    off = slot % PAGE
    dims = tl.arange(0, D)
    tl.store(cache + page * sb + off * sp + dims, tl.load(k + t.to(tl.int64) * sk + dims))
