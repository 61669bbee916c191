"""One-line regressions of the shipped kernels, applied in memory to their source: each must be rejected under
the kernel's own contract, naming the obligation and the line (tests/test_verifier_shipped_regressions.py).

(module, kernel, source text, replacement, goal, obligation, text of the line the failure must name)
"""
REGRESSIONS = [
    # a padding token (slot -1) is no longer skipped: it writes the row before page 0's first slot
    ("vosti_plugin.attention.kv_write", "_write_kv_kernel", "    if slot < 0:\n        return\n", "",
     "writes_only_its_slots", "write-frame", "tl.store(k_slot"),
    ("vosti_plugin.attention.kv_write", "_write_kv_kernel", "    if slot < 0:\n        return\n", "",
     "slot_write", "int-division", "page = slot // PAGE_SIZE"),
    # the row offset row * stride is formed in int32 and wraps past 2**31 elements
    ("vosti_plugin.ops.softmax", "softmax_kernel", "row = tl.program_id(0).to(tl.int64)", "row = tl.program_id(0)",
     "row_invariance", "int-overflow", "v = tl.load(x_ptr + row * stride_x + cols, mask=cols < V"),
    # V past the block's last key is read unmasked (another request's slot or garbage) and multiplied by p = 0
    ("vosti_plugin.attention.paged_attention", "_paged_attention_segments_kernel",
     "v = tl.load(v_ptr + v_offsets[:, None] + dims[None, :], mask=key_valid[:, None] & dim_ok[None, :],",
     "v = tl.load(v_ptr + v_offsets[:, None] + dims[None, :], mask=dim_ok[None, :],",
     "causal_row_invariance", "read-equal-region", "v = tl.load(v_ptr"),
    # a split program exits when the step's longest sequence ends inside its segment, which still holds keys
    ("vosti_plugin.attention.paged_attention", "_paged_attention_segments_kernel",
     "if tl.program_id(2) * SEGMENT >= tl.load(max_seq_len_ptr):",
     "if (tl.program_id(2) + 1) * SEGMENT > tl.load(max_seq_len_ptr):",
     "causal_segment_partials", "coverage", "tl.store(part_m_ptr"),
]
