"""write_kv writes exactly its slots: slot -1 writes nothing and every other slot keeps its bits."""

import torch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vosti_plugin.attention.kv_write import write_kv
from vosti_plugin.attention.paged_batch import bitwise_equal

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    num_blocks=st.integers(1, 6),
    page_size=st.sampled_from([4, 16]),
    num_kv_heads=st.sampled_from([1, 2, 3]),
    fused_kv=st.booleans(),
    data=st.data(),
)
def test_kv_write_touches_only_its_slots(num_blocks, page_size, num_kv_heads, fused_kv, data):
    head_dim = 16
    num_slots = num_blocks * page_size
    slots = data.draw(st.lists(st.integers(0, num_slots - 1), unique=True, max_size=min(num_slots, 10)))
    skipped = data.draw(st.lists(st.booleans(), min_size=len(slots), max_size=len(slots)))
    mapping = [-1 if skip else s for s, skip in zip(slots, skipped)]
    num_tokens = len(mapping)
    gen = torch.Generator().manual_seed(len(mapping) * 31 + num_blocks)
    key = torch.randn(num_tokens, num_kv_heads, head_dim, generator=gen).to(DEVICE)
    value = torch.randn(num_tokens, num_kv_heads, head_dim, generator=gen).to(DEVICE)
    if fused_kv:
        kv = torch.randn(num_blocks, 2, page_size, num_kv_heads, head_dim, generator=gen).to(DEVICE)
        k_cache, v_cache = kv.unbind(1)
    else:
        k_cache = torch.randn(num_blocks, page_size, num_kv_heads, head_dim, generator=gen).to(DEVICE)
        v_cache = torch.randn(num_blocks, page_size, num_kv_heads, head_dim, generator=gen).to(DEVICE)
    expected_k, expected_v = k_cache.clone(), v_cache.clone()
    for t, slot in enumerate(mapping):
        if slot >= 0:
            expected_k[slot // page_size, slot % page_size] = key[t]
            expected_v[slot // page_size, slot % page_size] = value[t]
    # trailing entries past the token count (vLLM pads slot_mapping) are ignored
    slot_mapping = torch.tensor(mapping + [0, 1], dtype=torch.int64, device=DEVICE)
    write_kv(key, value, k_cache, v_cache, slot_mapping)
    assert bitwise_equal(k_cache, expected_k)
    assert bitwise_equal(v_cache, expected_v)


def test_kv_write_with_no_tokens_is_a_no_op():
    k_cache = torch.randn(2, 4, 1, 16, device=DEVICE)
    v_cache = torch.randn(2, 4, 1, 16, device=DEVICE)
    before = (k_cache.clone(), v_cache.clone())
    empty = torch.empty(0, 1, 16, device=DEVICE)
    write_kv(empty, empty, k_cache, v_cache, torch.empty(0, dtype=torch.int64, device=DEVICE))
    assert bitwise_equal(k_cache, before[0]) and bitwise_equal(v_cache, before[1])
