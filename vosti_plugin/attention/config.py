"""Launch configurations for the paged attention kernels.

A configuration is a function of the model geometry only: (head_dim, query heads per KV head, page size,
dtype). Nothing here looks at batch size, query lengths, sequence lengths or the number of pages, so
every row of every batch runs the same tile shapes and the same reduction order. There is no autotuning:
`CATALOG` lists every configuration the plugin can launch, so a verifier or an init-time check can
enumerate them all.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import torch

# Head dims that are not a power of two run on the next power of two with the extra lanes masked to 0.
SUPPORTED_HEAD_DIMS: tuple[int, ...] = (32, 64, 80, 96, 128, 256)  # 32: the bundled tiny CPU model
SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
SUPPORTED_PAGE_SIZES: tuple[int, ...] = (16, 32, 64)
# Query heads per KV head: a tile gives each KV head `group` rows per token (the next power of two), the
# rows past queries_per_kv are masked. The kernel takes any ratio; the catalog lists 1..64.
MAX_QUERIES_PER_KV = 64
SUPPORTED_QUERIES_PER_KV: tuple[int, ...] = tuple(range(1, MAX_QUERIES_PER_KV + 1))


def next_power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


class UnsupportedGeometry(ValueError):
    """The attention geometry has no configuration in the catalog."""


@dataclass(frozen=True)
class AttentionLaunchConfig:
    """Everything a launch needs; nothing in it is derived from batch, lengths or pages.

    block_q:    query tokens per program.
    block_m:    rows per program = block_q * group (all query heads of one KV head share loads), where the
                group is queries_per_kv rounded up to a power of two; rows of the padding heads are masked.
    block_n:    KV tile size in positions; tiles sit on a fixed grid starting at position 0.
    segment:    fixed KV segment length (a multiple of block_n) for split-KV. The split SIZE is fixed,
                the number of segments follows from the sequence length.
    num_warps, num_stages: Triton launch parameters.
    row_sums_by_dot: softmax row sums by an MMA against ones instead of tl.sum (by geometry; VOSTI_ATTENTION_ROW_SUMS).
    head_blocks: programs that share one KV head's query heads, `group` heads each (FOLD launches: a row's fold
                 reads no keys, so a KV head's heads need not share a program); 1 for every other launch.
    kv_tma:     K/V tiles read by TMA descriptor loads, one per tile (a tile lies in one page), where the other
                launches look a page up and form an address per key: the same values, so the same bits.
    """

    block_q: int
    block_m: int
    block_n: int
    segment: int
    num_warps: int
    num_stages: int
    queries_per_kv: int = 0     # query heads per KV head; 0 means block_m // block_q (no padding rows)
    row_sums_by_dot: bool = False
    head_blocks: int = 1
    kv_tma: bool = False

    def __post_init__(self) -> None:
        for name in ("block_q", "block_m", "block_n", "segment"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"AttentionLaunchConfig.{name}={value} must be a power of two")
        if self.block_m % self.block_q:
            raise ValueError(f"block_m={self.block_m} must be a multiple of block_q={self.block_q}")
        if self.segment % self.block_n:
            raise ValueError(f"segment={self.segment} must be a multiple of block_n={self.block_n}")
        if self.queries_per_kv == 0:
            object.__setattr__(self, "queries_per_kv", self.block_m // self.block_q)
        if self.head_blocks == 1 and next_power_of_two(self.queries_per_kv) != self.group:
            raise ValueError(f"block_m / block_q = {self.group} must be {self.queries_per_kv} queries per KV head "
                             f"rounded up to a power of two")
        blocks = -(-self.queries_per_kv // self.group)
        if self.head_blocks != 1 and (self.head_blocks < 1 or blocks != self.head_blocks):
            raise ValueError(f"head_blocks={self.head_blocks} must be {self.queries_per_kv} queries per KV head in "
                             f"blocks of block_m / block_q = {self.group}")

    @property
    def group(self) -> int:
        """Tile rows per token and KV head (per head block): queries_per_kv rounded up to a power of two."""
        return self.block_m // self.block_q


@dataclass(frozen=True)
class GeometryKey:
    """The only quantities a configuration may depend on."""

    head_dim: int
    queries_per_kv: int
    page_size: int
    dtype: torch.dtype


# 16-bit tiles were chosen on an H200 by integration/gpu/attention_sweep.py (results in
# integration/results/h200-attention-sweep/): 64 rows x 64 positions beat the earlier 32 x 64 (head_dim 128)
# and 32 x 32 (head_dim 256) in decode at every batch and context measured and ran prefill 1.6-2.2x faster.
# fp32 (the CPU interpreter) keeps smaller tiles.
def _rows_per_program(head_dim: int, dtype: torch.dtype) -> int:
    del head_dim
    return 32 if dtype == torch.float32 else 64


def _kv_tile(head_dim: int, dtype: torch.dtype) -> int:
    if dtype == torch.float32:
        return 32 if head_dim <= 128 else 16
    return 64


# Row sums by dot (and so 16-row decode tiles, below) where the H200 timed them faster: 16-bit head dim 256
# (Gemma-2/3). There a 64-row decode tile holds one token's 2-4 query rows in a [64 x 256] fp32 accumulator on
# 8 warps; 16-row tiles took 0.63-0.93x its decode attention time at batch 1-64 and 1K-8K, and Gemma-3-4B decoded
# 1.06-1.21x faster end to end for 0.96-1.00x the prefill speed (session 30). At head dim 128 they took 0.91-1.09x
# (slower at 1K with a 128K max_model_len's grid), so the other geometries keep tl.sum and the prefill tiles.
def _row_sums_by_dot_rule(key: GeometryKey) -> bool:
    return key.dtype != torch.float32 and key.head_dim >= 256


def _config_for(key: GeometryKey) -> AttentionLaunchConfig:
    group = next_power_of_two(key.queries_per_kv)
    block_m = max(_rows_per_program(key.head_dim, key.dtype), group)
    block_n = _kv_tile(key.head_dim, key.dtype)
    return AttentionLaunchConfig(
        block_q=block_m // group,
        block_m=block_m,
        block_n=block_n,
        segment=512,
        num_warps=4 if key.head_dim <= 128 else 8,
        num_stages=2,
        queries_per_kv=key.queries_per_kv,
        row_sums_by_dot=_row_sums_by_dot_rule(key),
    )


# Decode-only steps (every query length 1) may run the split path in shorter row tiles: a decode program holds
# one token's `group` rows, so a 64-row tile is mostly padding rows. The verifier proves a row's segment partials
# equal across the two tile heights (goal `causal_segment_partials across`); whether the GPU's row sums reduce in
# the same order in both shapes is a platform fact, checked at startup (launch.host_numerics). With row sums by
# dot the H200 gave 16- and 64-row tiles one digest in every case of session 21, with tl.sum not (2 of 45 decode
# batches differed; Gemma-3-4B's startup probe refused it in session 24): so decode tiles follow the row sums,
# and VOSTI_DECODE_TILE_ROWS (0 or 16) overrides that for every geometry.
DECODE_TILE_ROWS: tuple[int, ...] = (16,)


def decode_tile_rows(config: AttentionLaunchConfig) -> int:
    """Rows per decode tile of a launched config (0: decode runs the prefill tiles): VOSTI_DECODE_TILE_ROWS where
    set, else 16 where the config sums rows by dot."""
    raw = os.environ.get("VOSTI_DECODE_TILE_ROWS", "").strip()
    if raw == "":
        return DECODE_TILE_ROWS[0] if config.row_sums_by_dot else 0
    if raw == "0":
        return 0
    if not raw.isdigit() or int(raw) not in DECODE_TILE_ROWS:
        raise ValueError(f"VOSTI_DECODE_TILE_ROWS={raw!r}: decode tiles of {' or '.join(map(str, DECODE_TILE_ROWS))} "
                         f"rows are proved (or 0 for the prefill tiles)")
    return int(raw)


def decode_config(config: AttentionLaunchConfig, rows: int) -> AttentionLaunchConfig:
    """The decode launch of a config in tiles of `rows` rows (at least one token's group); the config itself when
    that is no shorter. With tl.sum's row sums each warp holds as many rows as in the config's own tiles (the sum's
    tree follows the layout); with row sums by dot the tile keeps the config's warps, which spill no registers
    where one or two warps holding a whole 16-row tile do (integration/results/cpu-sm90-static/)."""
    block_m = max(rows, config.group)
    if rows < 1 or block_m >= config.block_m:
        return config
    warps = config.num_warps if config.row_sums_by_dot else max(1, config.num_warps * block_m // config.block_m)
    return dataclasses.replace(config, block_m=block_m, block_q=block_m // config.group, num_warps=warps)


def launched_decode_config(config: AttentionLaunchConfig) -> AttentionLaunchConfig:
    """The config a deployment's decode-only steps launch: its decode tiles (decode_tile_rows) where they apply."""
    return decode_config(config, decode_tile_rows(config))


# Prefill steps on the fused path in taller tiles, decode steps on the split path (VOSTI_PREFILL_FUSED_FROM=N: steps
# of at least N query tokens, one of them a prefill, run fused). One deployment then runs both paths for the same
# rows, which the verifier proves through the FOLD launch mode (paged_attention's contract: a fused row equals the
# FOLD of the split partials of that row, whatever the two launches' tile heights); the split path's combine is
# then a FOLD launch. Whether the GPU's row sums keep their bits in the taller tile is a platform fact, checked at
# startup (launch.host_numerics).
# On by default from 512 tokens for 16-bit geometries of up to 8 query heads a KV head. H100, session 36 (batch 4,
# 8K / 16K): Llama-3.1-8B prefill 1.09x / 1.16x the split path's tok/s, decode 0.99x / 0.97x; Gemma-3-4B prefill
# 1.04x / 1.07x, decode 1.02x / 1.05x (integration/results/h100-s36). Off for fp32 (the CPU interpreter, where
# prefill speed is not the point) and for groups of 16+ query heads, whose chain proofs take one geometry a proof
# (verifier_catalog's _cross_chunk: about 6,000 proof groups, not a catalog a 2-core machine proves ahead of time).
FUSED_PREFILL_ENV = "VOSTI_PREFILL_FUSED_FROM"
FUSED_PREFILL_DEFAULT_FROM = 512
FUSED_PREFILL_MAX_GROUP = 8


def fused_prefill_from(dtype: torch.dtype, queries_per_kv: int) -> int:
    """Query tokens from which a step with a prefill runs the fused path, for a geometry (0: every step runs the
    deployment's path). VOSTI_PREFILL_FUSED_FROM=N sets it for every geometry (0: off); unset, the default above."""
    raw = os.environ.get(FUSED_PREFILL_ENV, "").strip()
    if raw == "":
        default_on = dtype != torch.float32 and next_power_of_two(queries_per_kv) <= FUSED_PREFILL_MAX_GROUP
        return FUSED_PREFILL_DEFAULT_FROM if default_on else 0
    if not raw.isdigit():
        raise ValueError(f"{FUSED_PREFILL_ENV}={raw!r}: a number of query tokens (0: off; unset: "
                         f"{FUSED_PREFILL_DEFAULT_FROM} for 16-bit geometries of up to {FUSED_PREFILL_MAX_GROUP} "
                         f"query heads a KV head)")
    return int(raw)


def prefill_config(config: AttentionLaunchConfig, head_dim: int, page_size: int) -> AttentionLaunchConfig:
    """The fused prefill launch of a config. Where a KV tile is a page: the config's tiles with K/V read by TMA
    descriptor loads in a 3-stage pipeline, 2 stages above head dim 128. H100, session 40 (results/h100-s40, a
    2048-token chunk at 8K / 16K): Llama-3.1-8B 0.85x / 0.81x the time of the 128-row pointer tiles below, Gemma-3-4B's
    global layers 0.88x / 0.87x, window layers 0.96x; the pointer loads in 3 stages are slower (1.27x), 4 stages gain
    nothing over 3. Session 41 (results/h100-s41): at head dim 256 (8 warps, 255 registers) 2 stages take 0.91-0.92x
    the time of 3 on Gemma-3-4B's global layers and 0.96x on its window layers (fewer spills).
    Else tiles of twice the rows on twice the warps (each warp keeps the rows it holds in the config's tiles, so a
    row sum reduces in the same tree) where that stays within 8 warps and the head dim is at most 128 (head dim
    256 spills in 128-row tiles: results/cpu-sm90-static); else the config."""
    if page_size == config.block_n:
        return dataclasses.replace(config, kv_tma=True, num_stages=2 if head_dim > 128 else 3)
    warps = config.num_warps * 2
    if head_dim > 128 or warps > 8:
        return config
    block_m = config.block_m * 2
    return dataclasses.replace(config, block_m=block_m, block_q=block_m // config.group, num_warps=warps)


def fold_config(config: AttentionLaunchConfig, head_dim: int) -> AttentionLaunchConfig:
    """The FOLD combine's launch of a config: a program per token and query head, as the combine kernel's (head
    blocks of one head), on a warp for every 64 fp32 of a row's partial. A program walks its row's segments one
    after another, so the programs in flight set the time: on the H100 at batch 1 and 16K, Llama-3.1-8B's FOLD with a
    program per KV head (its 4 query heads) took +11 % over the combine kernel on 8 warps, +23 % on 1
    (integration/results/h100-s34); a program per query head gives the walk the combine kernel's 4x the programs
    (timed against it: the next GPU lease's `attention_variants.py`)."""
    width = next_power_of_two(head_dim)
    return dataclasses.replace(config, block_m=1, block_q=1, num_warps=min(8, max(1, width // 64)),
                               head_blocks=config.queries_per_kv)


# How a tile sums its softmax rows. "sum" (tl.sum) reduces in a tree that follows the tile's layout, so on the
# H200 16- and 64-row tiles give other bits; "dot" (an MMA against ones, on the 16-bit probabilities the values'
# dot reads) gave 16- and 64-row tiles one digest in all 57 cases of session 21, and other bits than "sum".
# The geometry picks one (_row_sums_by_dot_rule); VOSTI_ATTENTION_ROW_SUMS=sum or =dot overrides it for every geometry.
ROW_SUMS = ("sum", "dot")


def row_sums_override() -> str | None:
    """VOSTI_ATTENTION_ROW_SUMS: "sum" or "dot" (None where unset: each geometry's own)."""
    raw = os.environ.get("VOSTI_ATTENTION_ROW_SUMS", "").strip().lower()
    if raw and raw not in ROW_SUMS:
        raise ValueError(f"VOSTI_ATTENTION_ROW_SUMS={raw!r}: row sums are {' or '.join(ROW_SUMS)} (unset: by geometry)")
    return raw or None


def with_row_sums(config: AttentionLaunchConfig) -> AttentionLaunchConfig:
    """The config as this deployment launches it (VOSTI_ATTENTION_ROW_SUMS where set)."""
    override = row_sums_override()
    return config if override is None else dataclasses.replace(config, row_sums_by_dot=override == "dot")


def _catalog() -> tuple[tuple[GeometryKey, AttentionLaunchConfig], ...]:
    entries = []
    for dtype in SUPPORTED_DTYPES:
        for head_dim in SUPPORTED_HEAD_DIMS:
            for queries_per_kv in SUPPORTED_QUERIES_PER_KV:
                for page_size in SUPPORTED_PAGE_SIZES:
                    key = GeometryKey(head_dim, queries_per_kv, page_size, dtype)
                    entries.append((key, _config_for(key)))
    return tuple(entries)


CATALOG: tuple[tuple[GeometryKey, AttentionLaunchConfig], ...] = _catalog()
_BY_KEY: dict[GeometryKey, AttentionLaunchConfig] = dict(CATALOG)


def geometry_key(
    head_dim: int, num_q_heads: int, num_kv_heads: int, page_size: int, dtype: torch.dtype
) -> GeometryKey:
    """Validate a geometry and return its catalog key; raises UnsupportedGeometry with the reason."""
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise UnsupportedGeometry(
            f"head_dim={head_dim} is not supported; supported head dims: {SUPPORTED_HEAD_DIMS}"
        )
    if dtype not in SUPPORTED_DTYPES:
        raise UnsupportedGeometry(f"dtype={dtype} is not supported; supported dtypes: {SUPPORTED_DTYPES}")
    if page_size not in SUPPORTED_PAGE_SIZES:
        raise UnsupportedGeometry(
            f"page_size={page_size} is not supported; supported page sizes: {SUPPORTED_PAGE_SIZES}"
        )
    if num_kv_heads < 1 or num_q_heads < 1 or num_q_heads % num_kv_heads:
        raise UnsupportedGeometry(
            f"num_q_heads={num_q_heads} must be a positive multiple of num_kv_heads={num_kv_heads}"
        )
    queries_per_kv = num_q_heads // num_kv_heads
    if queries_per_kv not in SUPPORTED_QUERIES_PER_KV:
        raise UnsupportedGeometry(
            f"{num_q_heads} query heads per {num_kv_heads} KV heads gives {queries_per_kv} queries per KV head;"
            f" the attention kernel supports 1 to {MAX_QUERIES_PER_KV}"
        )
    return GeometryKey(head_dim, queries_per_kv, page_size, dtype)


def select_config(
    head_dim: int, num_q_heads: int, num_kv_heads: int, page_size: int, dtype: torch.dtype
) -> AttentionLaunchConfig:
    """The launch configuration for a model geometry (never for a batch), with this deployment's row sums."""
    return with_row_sums(_BY_KEY[geometry_key(head_dim, num_q_heads, num_kv_heads, page_size, dtype)])
