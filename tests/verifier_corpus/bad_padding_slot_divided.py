"""Negative (integer model): a padding token's slot -1 is split into page and offset without the
`if slot < 0: return` guard; Triton's // and % truncate (-1 // 16 = 0, -1 % 16 = -1), so the store lands on
the row before page 0's first slot, another request's data: outside the valid slots the frame allows."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "write-frame"
CONFIGS = [{"D": 64, "PAGE": 16}]


@contract(
    params={"k": tensor(("T", "D"), ("sk", 1)), "cache": tensor(("NB", "PAGE", "D"), ("sb", "sp", 1)),
            "slots": tensor(("T",), (1,), "int64")},
    grid=("T",),
    verif=[goal("writes_only_its_slots",
                pre=("forall(a, 0 <= a < L.T, L.slots[a] < L.NB * PAGE)",),
                post=("forall(t, 0 <= t < L.T and L.slots[t] >= 0, only(L.cache[L.slots[t] // PAGE, "
                      "L.slots[t] % PAGE, :]))",))],
)
@triton.jit
def write_slots_kernel(k, cache, slots, sk, sb, sp, D: tl.constexpr, PAGE: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slots + t)
    page = slot // PAGE
    off = slot % PAGE
    dims = tl.arange(0, D)
    tl.store(cache + page * sb + off * sp + dims, tl.load(k + t.to(tl.int64) * sk + dims))  # BUG
