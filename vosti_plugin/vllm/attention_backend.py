"""vLLM attention backend classes for vosti (vLLM 0.26 and 0.32; differences in vosti_plugin.vllm.compat).

vLLM finds them at the public class path `vosti_plugin.attention.backend.VostiAttentionBackend`
(vosti_plugin.selection.BACKEND_PATH), which is this module under a second name.

One kernel path serves prefill, chunked prefill and decode; the launch config comes from the model
geometry alone (see vosti_plugin.attention.config.select_config). Where decode tiles are on (config.decode_tile_rows:
rows summed by dot, or VOSTI_DECODE_TILE_ROWS), a step whose every query has length 1 runs the geometry's decode
config instead, whose rows the verifier proves equal to the
prefill config's (config.decode_config). From config.fused_prefill_from's threshold (512 query tokens for 16-bit
geometries of up to 8 query heads a KV head; VOSTI_PREFILL_FUSED_FROM=N sets it, 0 turns it off), a step that holds
a prefill runs the fused path in config.prefill_config's taller tiles and the split path's combine is a
FOLD launch, whose rows the verifier proves equal to the fused launch's (paged_attention's chain of goals).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

import torch

from vosti_plugin import forward_counters
from vosti_plugin.vllm import compat
from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

ensure_interpreter_without_gpu()

from vosti_plugin.attention.config import (  # noqa: E402
    fold_config, fused_prefill_from, launched_decode_config, prefill_config, select_config)
from vosti_plugin.attention import paged_attention as attention_kernels  # noqa: E402
from vosti_plugin.attention.kv_write import write_kv  # noqa: E402
from vosti_plugin.attention.paged_attention import (  # noqa: E402
    num_kv_segments,
    paged_attention,
    split_workspace_numel,
    step_max_seq_len,
)
from vosti_plugin.attention.sub_launch import deployment_path, run_in_launches  # noqa: E402
from vosti_plugin.launch.log import vosti_logger  # noqa: E402

(
    _AttentionBackend,
    _AttentionImpl,
    _AttentionMetadataBuilder,
    _AttentionCGSupport,
    _AttentionType,
) = compat.attention_metadata_base()

BACKEND_NAME = "VOSTI"
PAGE_SIZE_MULTIPLE = 16

# Split-KV workspace budget per device. The split path (parallel over KV segments, fast decode) is used
# when the largest CUDA-graph step fits in one launch; a larger (eager) step runs as several launches of
# at most `capacity` tokens (vosti_plugin.attention.sub_launch, inside the kernel contract). Otherwise
# every step takes the fused path. On CPU the Triton interpreter pays per program and the fused path runs
# the fewest (no combine kernel): a vosti engine under memory pressure ran 58 s instead of 88 s.
SPLIT_WORKSPACE_BYTES = {"cuda": 2 << 30, "cpu": 0}
# The budget may grow to what the largest CUDA-graph step needs, up to this share of the device's memory
# (the profiling run reserves it before the KV cache is sized); beyond that the deployment runs fused.
# VOSTI_SPLIT_WORKSPACE_SHARE sets the share (0: never grow).
SPLIT_WORKSPACE_MAX_SHARE = 0.05
_WORKSPACES: dict = {}


@dataclass
class VostiAttentionMetadata:
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    block_table: torch.Tensor
    slot_mapping: torch.Tensor
    # A static upper bound on any sequence length (max_model_len), so the launch grid does not
    # depend on the batch and the kernel needs no host sync (CUDA graphs).
    max_model_len: int
    # Host copy of query_start_loc: plans a step too large for one split launch (eager steps only).
    query_start_loc_cpu: torch.Tensor | None = None
    # The step's longest sequence on the device, reduced by the first layer of an eager step and shared by
    # the others (inside a CUDA graph every layer reduces its own: a graph must not read an eager tensor).
    max_seq_len_device: torch.Tensor | None = None


class VostiAttentionMetadataBuilder(_AttentionMetadataBuilder[VostiAttentionMetadata]):
    _cudagraph_support: ClassVar = _AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.max_model_len = vllm_config.model_config.max_model_len

    def build_for_cudagraph_capture(self, common_attn_metadata):
        metadata = self.build(0, common_attn_metadata)
        metadata.seq_lens.fill_(1)
        return metadata

    def build(self, common_prefix_len, common_attn_metadata, fast_build: bool = False):
        m = common_attn_metadata
        return VostiAttentionMetadata(
            num_actual_tokens=m.num_actual_tokens,
            max_query_len=m.max_query_len,
            max_seq_len=m.max_seq_len,
            query_start_loc=m.query_start_loc,
            seq_lens=m.seq_lens,
            block_table=m.block_table_tensor,
            slot_mapping=m.slot_mapping,
            max_model_len=self.max_model_len,
            query_start_loc_cpu=getattr(m, "query_start_loc_cpu", None),
        )


class VostiAttentionBackend(_AttentionBackend):
    accept_output_buffer: bool = True
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float16, torch.bfloat16, torch.float32]
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto"]

    @staticmethod
    def get_name() -> str:
        return BACKEND_NAME

    @staticmethod
    def get_impl_cls():
        return VostiAttentionImpl

    @staticmethod
    def get_builder_cls():
        return VostiAttentionMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None):
        return [compat.multiple_of(PAGE_SIZE_MULTIPLE)]

    @classmethod
    def supports_block_size(cls, block_size: int | None) -> bool:
        return block_size is None or block_size % PAGE_SIZE_MULTIPLE == 0

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        from vosti_plugin.attention.config import SUPPORTED_HEAD_DIMS

        return sorted(SUPPORTED_HEAD_DIMS)

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return True

    @classmethod
    def supports_batch_invariance(cls) -> bool:
        return True

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == _AttentionType.DECODER

    @classmethod
    def supports_compute_capability(cls, capability) -> bool:
        return True

    @staticmethod
    def get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size, cache_dtype_str="auto"):
        # Only vLLM 0.26 asks; 0.32 uses this same standard logical layout for every backend.
        if block_size % PAGE_SIZE_MULTIPLE != 0:
            raise ValueError(f"vosti needs a page size that is a multiple of {PAGE_SIZE_MULTIPLE}, got {block_size}")
        return (num_blocks, num_kv_heads, block_size, 2 * head_size)


def split_workspace_share() -> float:
    raw = os.environ.get("VOSTI_SPLIT_WORKSPACE_SHARE", "")
    if not raw:
        return SPLIT_WORKSPACE_MAX_SHARE
    try:
        share = float(raw)
    except ValueError:
        share = -1.0
    if not 0.0 <= share < 1.0:
        raise ValueError(f"VOSTI_SPLIT_WORKSPACE_SHARE={raw!r} must be a share of device memory in [0, 1)")
    return share


def _workspace_stretch_bytes(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    return int(torch.cuda.get_device_properties(device).total_memory * split_workspace_share())


# Below this many segments on the grid, the dead programs past a step's longest sequence cost less than the
# reduction that lets them exit first (2 us per layer inside a CUDA graph; H200, Llama-3.1-8B,
# integration/results/h200-s13/): such grids pass a bound every sequence is under, and nothing exits.
DEAD_SEGMENT_EXIT_MIN_SEGMENTS = 32
# A step outside CUDA-graph capture (prefill, mixed, eager) sizes its segment grid from the step's longest
# sequence (vLLM's host max_seq_len, the bound its FlashAttention backend takes as max_seqlen_k) instead of
# max_model_len, and so fits more tokens in one split launch; the contract covers any grid past a row's last
# segment (H200, the four classes bitwise with it: integration/results/h200-s14/). VOSTI_EAGER_STEP_GRID=0:
# every step's grid covers max_model_len.
EAGER_STEP_GRID: bool | None = None      # read from the environment at the first step of the process
_NO_BOUND: dict = {}


def _make_no_bound(device: torch.device) -> None:
    if device not in _NO_BOUND:
        _NO_BOUND[device] = torch.full((1,), 2**31 - 1, dtype=torch.int32, device=device)


def _step_max_seq_len(attn_metadata: VostiAttentionMetadata, segments: int) -> torch.Tensor:
    """A bound on every seq_lens entry of the step (sub-launches trim seq_lens, never extend them)."""
    seq_lens = attn_metadata.seq_lens
    capturing = seq_lens.is_cuda and torch.cuda.is_current_stream_capturing()
    if segments < DEAD_SEGMENT_EXIT_MIN_SEGMENTS:
        # made outside any graph capture (a tensor filled during capture holds nothing until a replay)
        if not capturing:
            _make_no_bound(seq_lens.device)
        if seq_lens.device in _NO_BOUND:
            return _NO_BOUND[seq_lens.device]
    if capturing:
        return step_max_seq_len(seq_lens)
    if attn_metadata.max_seq_len_device is None:
        attn_metadata.max_seq_len_device = step_max_seq_len(seq_lens)
    return attn_metadata.max_seq_len_device


_LOGGED_PATHS: set = set()
_WARMED: set = set()   # the launch forms each process has compiled, per layer kind (VostiAttentionImpl._warm_up)


def _log_path_once(path: str, capacity: int, max_model_len: int, max_graph_tokens: int, device_type: str,
                   fused_from: int = 0) -> None:
    key = (path, capacity, max_model_len, max_graph_tokens, device_type, fused_from)
    if key in _LOGGED_PATHS:
        return
    _LOGGED_PATHS.add(key)
    log = vosti_logger()
    if path == "split":
        log.info("vosti attention: split-KV path, up to %d tokens per launch (max_model_len %d)%s", capacity,
                 max_model_len, f"; steps of {fused_from}+ tokens with a prefill run fused" if fused_from else "")
    elif device_type == "cuda":    # on CPU the fused path is the intended one (SPLIT_WORKSPACE_BYTES)
        log.warning("vosti attention: fused path for max_model_len %d: the split-KV workspace of a %d-token "
                    "CUDA-graph step exceeds %.0f%% of device memory, so decode runs one program per query "
                    "block and KV head (slow at long context); a smaller --max-model-len or "
                    "--max-num-seqs keeps the split path", max_model_len, max_graph_tokens,
                    100 * split_workspace_share())


def graph_attention_tokens(mode, *, eager: bool, capture: int, max_num_seqs: int, max_num_tokens: int,
                           decode_query_len: int = 1) -> int:
    """The most query tokens of a step whose attention a CUDA graph may replay (1 when none does).

    This backend supports full graphs of uniform decode steps only (UNIFORM_SINGLE_TOKEN_DECODE), so vLLM
    downgrades a mode with full graphs of mixed steps to FULL_AND_PIECEWISE or FULL_DECODE_ONLY, and
    captures full graphs only at capture sizes up to max_num_seqs x the decode query length (0.26 and 0.32:
    CudagraphDispatcher.initialize_cudagraph_keys). Piecewise graphs split at attention, which runs
    eagerly between them, so they may hold steps up to the capture size without bounding this. A PIECEWISE
    mode keeps the bound of the capture size: whether its splitting ops leave attention out is not known here."""
    name = getattr(mode, "name", str(mode)) if mode is not None else "NONE"
    if eager or name == "NONE":
        return 1
    if hasattr(mode, "has_full_cudagraphs") and mode.has_full_cudagraphs():
        return max(1, min(max_num_tokens, capture or max_num_tokens, max_num_seqs * decode_query_len))
    return min(max_num_tokens, max(capture, max_num_seqs))


class VostiAttentionImpl(_AttentionImpl):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        alibi_slopes=None,
        sliding_window: int | None = None,
        kv_cache_dtype: str = "auto",
        logits_soft_cap: float | None = None,
        attn_type: str = "decoder",
        kv_sharing_target_layer_name: str | None = None,
        sinks: torch.Tensor | None = None,
        **unsupported,
    ) -> None:
        refused = []
        if alibi_slopes is not None:
            refused.append("ALiBi slopes")
        if sinks is not None:
            refused.append("attention sinks")
        if kv_cache_dtype != "auto":
            refused.append(f"quantized KV cache ({kv_cache_dtype})")
        if attn_type != _AttentionType.DECODER:
            refused.append(f"attention type {attn_type}")
        if unsupported.get("chunk_lookback", -1) not in (-1, None):
            refused.append("chunk lookback")
        if unsupported.get("use_alibi_sqrt"):
            refused.append("ALiBi sqrt")
        if refused:
            raise ValueError("vosti attention does not support: " + ", ".join(refused))
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.sliding_window = sliding_window
        self.logits_soft_cap = logits_soft_cap or None
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.attn_type = attn_type
        self._config = None
        self._path = None
        from vllm.config import get_current_vllm_config

        vllm_config = get_current_vllm_config()
        from vosti_plugin.launch.check import check_in_engine_process

        facts = check_in_engine_process(vllm_config, where="worker")
        if facts is not None:
            from vosti_plugin.launch.verified import layer_outside_pins

            why = layer_outside_pins(facts, soft_cap=bool(self.logits_soft_cap and self.logits_soft_cap > 0),
                                     window=bool(sliding_window and sliding_window > 0))
            if why:
                raise ValueError(f"vosti: {why}; please report this model's architecture ({facts.architecture})")
        from vosti_plugin.launch.host_numerics import check_in_worker

        check_in_worker(vllm_config)   # once per process: this host's kernels are lane-invariant
        self.max_num_tokens = vllm_config.scheduler_config.max_num_batched_tokens
        self.max_model_len = vllm_config.model_config.max_model_len
        self.page_size = vllm_config.cache_config.block_size
        # The largest step a CUDA graph may replay must be a single launch (its plan is fixed at capture).
        cc = vllm_config.compilation_config
        spec = vllm_config.speculative_config
        self.max_graph_tokens = graph_attention_tokens(
            getattr(cc, "cudagraph_mode", None), eager=vllm_config.model_config.enforce_eager,
            capture=getattr(cc, "max_cudagraph_capture_size", None) or 0,
            max_num_seqs=vllm_config.scheduler_config.max_num_seqs, max_num_tokens=self.max_num_tokens,
            decode_query_len=1 + (getattr(spec, "num_speculative_tokens", 0) or 0 if spec is not None else 0))
        self._capacity = 0
        self._decode_config = None
        self._fused_from = 0
        self._prefill_config = self._fold_config = None
        self._warmed = False

    def _launch_config(self, page_size: int, dtype: torch.dtype, device: torch.device):
        if self._config is None:
            self._config = select_config(self.head_size, self.num_heads, self.num_kv_heads, page_size, dtype)
            self._decode_config = launched_decode_config(self._config)
            self._path, self._capacity = deployment_path(
                max_num_tokens=self.max_num_tokens, max_graph_tokens=self.max_graph_tokens,
                max_model_len=self.max_model_len, page_size=page_size, segment=self._config.segment,
                num_q_heads=self.num_heads, head_dim=self.head_size,
                limit_bytes=SPLIT_WORKSPACE_BYTES.get(device.type, SPLIT_WORKSPACE_BYTES["cpu"]),
                stretch_bytes=_workspace_stretch_bytes(device))
            self._fused_from = fused_prefill_from(dtype, self._config.queries_per_kv)
            if self._path == "split" and self._fused_from:
                self._prefill_config = prefill_config(self._config, self.head_size, page_size)
                self._fold_config = fold_config(self._config, self.head_size)
            _log_path_once(self._path, self._capacity, self.max_model_len, self.max_graph_tokens, device.type,
                           self._fused_from if self._prefill_config is not None else 0)
        return self._config

    def _step_launch(self, num_tokens: int, max_query_len: int):
        """(config, path, fold) of a step's launch; after _launch_config."""
        if self._path == "split" and max_query_len == 1:
            return self._decode_config, "split", self._fold_config  # decode-only (CUDA graphs capture only these)
        if self._prefill_config is not None and num_tokens >= self._fused_from:
            # a prefill step: fused in taller tiles, the same bits as the split path's (proved: fused_equals_fold)
            return self._prefill_config, "fused", None
        return self._config, self._path, self._fold_config

    def _warm_up(self, q: torch.Tensor, out: torch.Tensor, page_size: int) -> None:
        """At a layer's first step (vLLM's profiling or warm-up run), launch each form a step of the layer can
        take once, on a small sequence, so that Triton compiles it before serving: vLLM's warm-up meets only the
        forms of the steps it runs, and a form first met while serving compiles mid-step. The inputs share what
        Triton specializes on with the engine's: q's and out's strides, the cache layout, the block table's
        width, 16-byte-aligned pointers. Not while a CUDA graph captures (it would record the launches)."""
        device, dtype = q.device, q.dtype
        if q.is_cuda and torch.cuda.is_current_stream_capturing():
            return
        self._warmed = True
        width = -(-self.max_model_len // page_size)
        forms = {}   # form -> query rows of its sequence
        for n, rows in ((1, 1), (2, 2), (max(2, self._fused_from), 2)):
            forms.setdefault(self._step_launch(n, rows), rows)
        key = (device, dtype, self.num_heads, self.num_kv_heads, self.head_size, page_size, width,
               self.sliding_window, self.logits_soft_cap, q.stride(), out.stride(), tuple(forms))
        if key in _WARMED:
            return
        shape = VostiAttentionBackend.get_kv_cache_shape(1, page_size, self.num_kv_heads, self.head_size)
        k_cache, v_cache = compat.split_kv_cache(torch.zeros(shape, dtype=dtype, device=device), self.head_size)
        block_table = torch.zeros((1, width), dtype=torch.int32, device=device)
        for (config, path, fold), rows in forms.items():
            seq_lens = torch.tensor([rows], dtype=torch.int32, device=device)
            query_start_loc = torch.tensor([0, rows], dtype=torch.int32, device=device)
            workspace = None
            if path == "split":
                workspace = self._workspace(num_kv_segments(block_table, page_size, config.segment,
                                                            self.max_model_len), device)
            shape = (rows, self.num_heads, self.head_size)
            q_rows = torch.empty_strided(shape, q.stride(), dtype=dtype, device=device).zero_()
            out_rows = torch.empty_strided(shape, out.stride(), dtype=dtype, device=device)
            # through the kernels' module, not this module's name for it, which observers of the steps replace
            attention_kernels.paged_attention(
                q_rows, k_cache, v_cache, block_table, seq_lens, query_start_loc, out_rows, scale=self.scale,
                config=config, sliding_window=self.sliding_window, soft_cap=self.logits_soft_cap, max_seqlen_k=rows,
                workspace=workspace, path=path, max_seq_len=step_max_seq_len(seq_lens), fold=fold)
        _WARMED.add(key)

    def _workspace(self, segments: int, device: torch.device):
        """One persistent fp32 workspace per device, sized for the largest step (CUDA-graph safe)."""
        numel = split_workspace_numel(self._capacity, self.num_heads, self.head_size, segments)
        ws = _WORKSPACES.get(device)
        if ws is None or ws.numel() < numel:
            ws = torch.empty(numel, dtype=torch.float32, device=device)
            _WORKSPACES[device] = ws
        return ws

    def _reserve_workspace(self, dtype: torch.dtype, device: torch.device) -> None:
        """Profiling run: take the split workspace for the longest sequence now, so that vLLM's memory
        profile counts it before the KV cache is sized (it is not freed afterwards)."""
        page_size = self.page_size
        if not page_size:
            return
        self._launch_config(page_size, dtype, device)
        _make_no_bound(device)
        if self._path == "split":
            pages = -(-self.max_model_len // page_size)
            self._workspace(-(-(pages * page_size) // self._config.segment), device)

    def _grid_bound(self, attn_metadata: VostiAttentionMetadata, query: torch.Tensor) -> int:
        """The KV length the segment grid covers: outside CUDA-graph capture the step's longest sequence, else
        (and with VOSTI_EAGER_STEP_GRID=0) max_model_len, what any CUDA-graph replay may need."""
        global EAGER_STEP_GRID
        if EAGER_STEP_GRID is None:
            EAGER_STEP_GRID = os.environ.get("VOSTI_EAGER_STEP_GRID", "1") != "0"
        if not EAGER_STEP_GRID or attn_metadata.max_seq_len < 1:
            return self.max_model_len
        if query.is_cuda and torch.cuda.is_current_stream_capturing():
            return self.max_model_len
        return min(self.max_model_len, attn_metadata.max_seq_len)

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        if self.kv_sharing_target_layer_name is not None:
            return
        k_cache, v_cache = compat.split_kv_cache(kv_cache, self.head_size)
        n = slot_mapping.shape[0]
        write_kv(key[:n], value[:n], k_cache, v_cache, slot_mapping)
        if forward_counters.counts is not None:
            forward_counters.counts["kv_write"] += 1

    def forward(
        self,
        layer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: VostiAttentionMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("vosti attention does not fuse output quantization")
        if attn_metadata is None:  # profiling run
            self._reserve_workspace(query.dtype, query.device)
            if not self._warmed and self._config is not None:
                rows = query.shape[0]
                self._warm_up(query.view(rows, self.num_heads, self.head_size),
                              output.view(rows, self.num_heads, self.head_size), self.page_size)
            return output.fill_(0)
        n = attn_metadata.num_actual_tokens
        k_cache, v_cache = compat.split_kv_cache(kv_cache, self.head_size)
        q = query[:n].view(n, self.num_heads, self.head_size)
        out = output[:n].view(n, self.num_heads, self.head_size)
        page_size = kv_cache.shape[2]
        self._launch_config(page_size, query.dtype, query.device)
        if not self._warmed:
            self._warm_up(q, out, page_size)
        config, path, fold = self._step_launch(n, attn_metadata.max_query_len)
        workspace = None
        capacity = self._capacity
        bound = self._grid_bound(attn_metadata, query)
        segments = num_kv_segments(attn_metadata.block_table, page_size, config.segment, bound)
        if path == "split":
            full = num_kv_segments(attn_metadata.block_table, page_size, config.segment, self.max_model_len)
            workspace = self._workspace(full, query.device)
            # the same budget holds more tokens of a step whose grid is smaller
            capacity = (split_workspace_numel(self._capacity, self.num_heads, self.head_size, full)
                        // split_workspace_numel(1, self.num_heads, self.head_size, segments))

        max_seq_len = _step_max_seq_len(attn_metadata, segments)

        def launch(q, out, block_table, seq_lens, query_start_loc):
            paged_attention(q, k_cache, v_cache, block_table, seq_lens, query_start_loc, out, scale=self.scale,
                            config=config, sliding_window=self.sliding_window, soft_cap=self.logits_soft_cap,
                            max_seqlen_k=bound, workspace=workspace, path=path, max_seq_len=max_seq_len, fold=fold)

        if path == "split" and n > capacity:
            if query.is_cuda and torch.cuda.is_current_stream_capturing():
                raise RuntimeError(
                    f"vosti: a CUDA graph is capturing a {n}-token attention step, more than one split launch "
                    f"holds ({capacity}); the graph-step bound ({self.max_graph_tokens} tokens) is wrong for this "
                    f"vLLM. Run with --enforce-eager or a smaller --max-num-seqs.")
            if attn_metadata.query_start_loc_cpu is None:
                raise RuntimeError("vosti: a step larger than the split workspace needs query_start_loc_cpu")
            run_in_launches(launch, q, out, attn_metadata.block_table, attn_metadata.seq_lens,
                            attn_metadata.query_start_loc_cpu.tolist(), capacity)
            if forward_counters.counts is not None:
                forward_counters.counts["attention_in_launches"] += 1
        else:
            launch(q, out, attn_metadata.block_table, attn_metadata.seq_lens, attn_metadata.query_start_loc)
        if forward_counters.counts is not None:
            forward_counters.counts["attention"] += 1
        return output
