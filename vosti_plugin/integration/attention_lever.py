"""Source edits of the shipped paged-attention kernel for the prefill lever, not shipped yet: fused prefill
launches whose interior key tiles skip the masks, row-equal to split decode launches whose combine is a FOLD
launch of the same kernel.

- FOLD (constexpr): the launch loads each segment's partial from the workspace (skipping the tile loop) and
  folds it with the fused branch's fold. As the split path's combine, it replaces `_combine_segments_kernel`.
- PROBE (constexpr, verification only): the fused branch also stores each segment's partial.
- INTERIOR (constexpr): a key tile that every valid row of the block sees whole (keys up to the block's first
  row, inside its last row's window) skips the causal/window select and the tile-liveness selects.

`tests/test_verifier_fused_split_chain.py` proves the chain on the kernel these edits build (fused prefill rows,
64 or 128 rows, INTERIOR or not, equal the FOLD of the split partials); `integration/gpu/attention_variants.py`
times them on the H200. One set of edits serves both, so what is timed is what is proved.
"""
from __future__ import annotations

import re
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "attention" / "paged_attention.py"

_CONSTEXPR = "    FUSED: tl.constexpr,\n"
_TILE_END = ("        tile_end = tl.maximum(tl.minimum((seg + 1) * TILES_PER_SEGMENT, last_pos // BLOCK_N + 1), "
             "tile_begin)\n")
_RUN_M = "    run_m = tl.full([BLOCK_M], float(\"-inf\"), dtype=tl.float32)\n"
_AFTER_TILE_LOOP = "            acc = tl.where(tile_live[:, None], acc_new, acc)\n\n        if FUSED:\n"

_SOURCE = SHIPPED.read_text()
# The shipped tile step from the causal/window select to the liveness selects (the edit anchor).
MASKED_TILE = _SOURCE[_SOURCE.index("            allowed = ("):
                      _SOURCE.index("            acc = tl.where(tile_live[:, None], acc_new, acc)\n")
                      + len("            acc = tl.where(tile_live[:, None], acc_new, acc)\n")]


def _whole_tile_step(masked: str) -> str:
    """The masked tile step without its select lines: the softmax update with every score allowed and the tile
    live, its temporaries renamed (names assigned in both branches of an `if` are merged by a select, which the
    verifier does not take for float predicates such as m_dead)."""
    body = masked[masked.index("            m_new"):masked.index("            m_i = tl.where(tile_live")]
    for old, new in (("m_new", "whole_m"), ("m_dead", "whole_dead"), ("alpha", "whole_alpha"), ("p", "whole_p"),
                     ("l_new", "l_i"), ("acc_new", "acc")):
        body = re.sub(rf"(?<![\w.]){old}\b", new, body)
    return body + "            m_i = whole_m\n"


# Names assigned in both branches are merged by a select; the interior branch's temporaries have their own names.
INTERIOR_OR_MASKED_TILE = ("""            interior = False
            if INTERIOR:
                interior = (tile * BLOCK_N >= interior_lo) & (tile * BLOCK_N + BLOCK_N - 1 <= interior_hi)
            if interior:
""" + "".join("    " + line + "\n" for line in _whole_tile_step(MASKED_TILE).splitlines()) + "            else:\n"
    + "".join("    " + line + "\n" if line else "\n" for line in MASKED_TILE.splitlines()))
INTERIOR_BOUNDS = """    interior_hi = context_len + first_local_token
    if USE_WINDOW:
        interior_lo = tl.maximum(last_pos - window + 1, 0)
    else:
        interior_lo = 0
"""
_FOLD_SKIPS_TILES = "        if FOLD:\n            tile_end = tile_begin\n"
_FOLD_LOADS = """        if FOLD:
            fpart = (token * num_q_heads + q_head) * num_segments + seg
            m_i = tl.load(part_m_ptr + fpart, mask=row_valid, other=float('-inf'))
            l_i = tl.load(part_l_ptr + fpart, mask=row_valid, other=0.0)
            acc = tl.load(part_acc_ptr + fpart[:, None] * HEAD_DIM + dims[None, :],
                          mask=row_valid[:, None] & dim_ok[None, :], other=0.0)
"""
_PROBE_STORES = """            if PROBE:
                ppart = (token * num_q_heads + q_head) * num_segments + seg
                tl.store(part_m_ptr + ppart, m_i, mask=row_valid)
                tl.store(part_l_ptr + ppart, l_i, mask=row_valid)
                tl.store(part_acc_ptr + ppart[:, None] * HEAD_DIM + dims[None, :], acc,
                         mask=row_valid[:, None] & dim_ok[None, :])
"""


def kernel_edits(bounds: str = INTERIOR_BOUNDS) -> list[tuple[str, str]]:
    """FOLD, PROBE and INTERIOR as constexprs of `_paged_attention_segments_kernel` (`bounds`: the interior
    tile range, replaceable by tests with wrong ones)."""
    return [
        (_CONSTEXPR, _CONSTEXPR + "    PROBE: tl.constexpr,\n    FOLD: tl.constexpr,\n    INTERIOR: tl.constexpr,\n"),
        (MASKED_TILE, INTERIOR_OR_MASKED_TILE),
        (_RUN_M, bounds + _RUN_M),
        (_TILE_END, _TILE_END + _FOLD_SKIPS_TILES),
        (_AFTER_TILE_LOOP, _AFTER_TILE_LOOP.replace("        if FUSED:\n", _FOLD_LOADS + "        if FUSED:\n")
         + _PROBE_STORES),
    ]


_MAIN_LAUNCH_FLAGS = "        FUSED=fused,\n        DOT_PRECISION="
_COMBINE_GUARD = "    if not fused:\n        guard.check(_combine_segments_kernel"
_RETURN = "    return out\n\n\ndef verifier_catalog"


def fold_combine_launch_edits(source: str, interior_fused: bool = False, fold_rows: int = 0,
                              fold_warps: int = 4) -> list[tuple[str, str]]:
    """The launcher with the split path's combine as a FOLD launch of the segments kernel (grid per query block
    and KV head), PROBE off; with `interior_fused`, fused launches take INTERIOR. `fold_rows` > 0: the FOLD launch
    takes tiles of that many rows (tokens = fold_rows // group, at least one; `fold_warps` warps) instead of the
    split launch's, so a decode step folds one token's heads per program as the combine kernel does."""
    start = source.index("    _paged_attention_segments_kernel[grid](\n")
    end = source.index("        enable_fp_fusion=False,\n    )\n", start) + len("        enable_fp_fusion=False,\n    )\n")
    fold = (source[start:end].replace("[grid]", "[(grid[0], grid[1], 1)]")
            .replace(_MAIN_LAUNCH_FLAGS, "        FUSED=True,\n        PROBE=False,\n        FOLD=True,\n"
                                         "        INTERIOR=False,\n        DOT_PRECISION="))
    if fold_rows:
        fold_q = f"max(1, {fold_rows} // config.group)"
        for old, new in (("[(grid[0], grid[1], 1)]", f"[(num_tokens // {fold_q} + num_seqs, grid[1], 1)]"),
                         ("        BLOCK_Q=config.block_q,\n", f"        BLOCK_Q={fold_q},\n"),
                         ("        BLOCK_M=config.block_m,\n", f"        BLOCK_M={fold_q} * config.group,\n"),
                         ("        num_warps=config.num_warps,\n", f"        num_warps={fold_warps},\n")):
            fold = apply(fold, [(old, new)], "the split launch")
    flags = ("        FUSED=fused,\n        PROBE=False,\n        FOLD=False,\n"
             f"        INTERIOR={'fused' if interior_fused else 'False'},\n        DOT_PRECISION=")
    return [(_MAIN_LAUNCH_FLAGS, flags),
            (_COMBINE_GUARD, "    if False:\n        guard.check(_combine_segments_kernel"),
            (_RETURN, "    if not fused:\n" + "".join("    " + line + "\n" if line else "\n"
                                                   for line in fold.splitlines()) + _RETURN)]


def apply(source: str, edits: list[tuple[str, str]], what: str = "the shipped kernel") -> str:
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"{what} changed: edit anchor found {source.count(old)} times: {old[:70]!r}")
        source = source.replace(old, new)
    return source
