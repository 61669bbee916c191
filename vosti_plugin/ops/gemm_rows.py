"""The row counts at which a GEMM changes row tiles, without Triton: read by the matmul's dispatch
(`ops/matmul.py`) and by the CUDA-graph capture sizes (`selection.py`), which run before the plugin has
chosen Triton's mode and so must not import kernel modules.

Below MID_MIN_ROWS a launch runs its config's decode tiles (16 rows for the bf16/fp16 configs), from
MID_MIN_ROWS the same config in MID_TILE_ROWS-row tiles (unless VOSTI_MID_GEMM=0), from TALL_MIN_ROWS the
tall path's TALL_TILE_ROWS-row tiles (16-bit dtypes, unless VOSTI_TALL_GEMM=0)."""
from __future__ import annotations

import os

# integration/gpu/decode_gemm_sweep.py --paths on the H200 (the shipped configs of 62 layer shapes, geometric
# means over the decode tiles' time; integration/results/h200-s28/gemm-paths): mid tiles 0.97x at 32 rows, 0.66x
# at 64, 0.59x at 128 and 256; the tall path 1.09x at 64, 0.65x at 128, 0.41x at 256, 0.34x at 384; every row
# of every path equal to the decode row.
DECODE_TILE_ROWS = 16
MID_MIN_ROWS = 64
MID_TILE_ROWS = 64
TALL_MIN_ROWS = 256
TALL_TILE_ROWS = 128


def mid_gemm_on() -> bool:
    """GEMMs of MID_MIN_ROWS rows up to the tall path's run in MID_TILE_ROWS-row tiles unless VOSTI_MID_GEMM=0."""
    return os.environ.get("VOSTI_MID_GEMM", "") != "0"
