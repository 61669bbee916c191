"""Every attribute of vLLM that vosti replaces, in one table, and the one mechanism that puts them in
and takes them out again.

Groups (each applied and undone as a unit, last in first out):
* `plugin`: applied by `vosti_plugin.register()` in every vLLM process; each replacement defers to the
  stock code unless vosti was selected.
* `ops`: while vosti runs the model (dense vLLM layers -> vosti's batch-invariant custom ops).
* `sampling`: while vosti runs the model (batch-invariant sampler, per-request refusals).

What vosti plugs in through vLLM's own extension points (no attribute replaced) is listed in
`EXTENSIONS`, with the private state an adapter touches. `undo()` leaves vLLM exactly as it was:
every owner's `__dict__` entry is the object it held before `apply()` (or absent again).

`REBINDINGS` lists the module globals naming a class a stock constructor builds (vLLM has no option
for it), rebound to a vosti subclass only while that constructor runs (`rebound()`, restored on return
or raise): the stock code then builds vosti's classes with its own arguments, through their normal
constructors. The window is process-wide: another thread building a stock scheduler at that moment
would get vosti's class (vLLM builds its scheduler once, on the engine core's main thread).

`python3 -m vosti_plugin.vllm.patches` (or `vosti patches`) prints the inventory.
"""
from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

GROUPS = ("plugin", "ops", "sampling")
_MISSING = object()


@dataclass(frozen=True)
class Patch:
    group: str
    owner: str             # "module" or "module:Class" (".__class__" names a metaclass)
    attribute: str
    why: str
    undo: str
    private: bool          # the replaced attribute (or the state it writes) is private to vLLM
    make: Callable | None = None          # stock attribute -> replacement
    applies: Callable | None = None       # owner -> bool; False: leave this owner alone
    optional: bool = False                # the owner is absent on some releases/platforms

    @property
    def target(self) -> str:
        return f"{self.owner}.{self.attribute}"


@dataclass(frozen=True)
class Extension:
    """Something vosti plugs into vLLM without replacing an attribute of vLLM."""
    point: str
    what: str
    private: str = ""      # private vLLM state the adapter reads or writes, if any


@dataclass(frozen=True)
class Rebinding:
    """A module global of vLLM that a stock constructor builds its object by, rebound while it runs."""
    owner: str             # the module
    attribute: str
    replacement: str       # the vosti class built instead
    during: str            # the call the rebinding lasts for
    why: str


_SETATTR_UNDO = "stock object set back into the owner's __dict__ (deleted if it was inherited)"


def inventory() -> list[Patch]:
    from vosti_plugin.vllm import collectives, compat, hooks, ops_layers, sampling_patches

    registry = "vllm.v1.attention.backends.registry"
    table = [
        Patch("plugin", f"{registry}:AttentionBackendEnum.__class__", "__getitem__",
              "AttentionBackendEnum['VOSTI'] (any case) resolves to CUSTOM, which points at vosti's backend",
              _SETATTR_UNDO, private=True, make=hooks.accept_vosti_name),
        Patch("plugin", "vllm.platforms.cpu:CpuPlatform", "get_attn_backend_cls",
              "the CPU platform ignores --attention-backend; honour CUSTOM while CUSTOM is vosti",
              _SETATTR_UNDO, private=False, make=hooks.cpu_honours_custom, optional=True),
        Patch("plugin", "vllm.engine.arg_utils:EngineArgs", "create_engine_config",
              "selecting vosti applies its engine arguments, runs the launch check and installs the runtime",
              _SETATTR_UNDO, private=False, make=hooks.engine_args_apply_vosti),
        Patch("ops", "vllm.model_executor.layers.linear:UnquantizedLinearMethod", "apply",
              "every unquantized linear -> torch.ops.vosti.linear", _SETATTR_UNDO, private=False,
              make=ops_layers.linear_apply),
        Patch("ops", "vllm.model_executor.layers.linear:UnquantizedLinearMethod", "process_weights_after_loading",
              "CPU: keep the plain weight (vLLM packs it for oneDNN/sgl and drops layer.weight)", _SETATTR_UNDO,
              private=False, make=ops_layers.keep_plain_weight),
        Patch("ops", "vllm.model_executor.layers.vocab_parallel_embedding:UnquantizedEmbeddingMethod", "apply",
              "the lm_head -> torch.ops.vosti.linear", _SETATTR_UNDO, private=False, make=ops_layers.linear_apply),
        Patch("ops", "vllm.model_executor.layers.vocab_parallel_embedding:UnquantizedEmbeddingMethod",
              "process_weights_after_loading", "CPU: keep the plain lm_head weight", _SETATTR_UNDO,
              private=False, make=ops_layers.keep_plain_weight),
        Patch("ops", "vllm.model_executor.layers.layernorm:RMSNorm", "forward",
              "RMSNorm (incl. fused residual add) -> torch.ops.vosti.rms_norm / fused_add_rms_norm",
              _SETATTR_UNDO, private=False, make=ops_layers.rms_norm_forward),
        Patch("ops", "vllm.model_executor.layers.layernorm:GemmaRMSNorm", "forward",
              "Gemma's (1 + w) norm -> the same vosti ops (vLLM's batch-invariant mode misses it)",
              _SETATTR_UNDO, private=False, make=ops_layers.gemma_rms_norm_forward),
        *(Patch("ops", f"vllm.model_executor.models.{m}:{cls}", "forward",
                "the post-attention norm and the pre-feedforward residual-add norm -> one launch "
                "(torch.ops.vosti.norm_add_rms_norm, the same bits); only over the stock forward it mirrors",
                _SETATTR_UNDO, private=False, make=ops_layers.gemma_decoder_layer_forward,
                applies=ops_layers.is_stock_gemma_layer, optional=True)
          for m, cls in (("gemma2", "Gemma2DecoderLayer"), ("gemma3", "Gemma3DecoderLayer"))),
        *(Patch("ops", f"vllm.model_executor.models.{m}:{cls}", "forward",
                "each layer's post-feedforward norm and the next layer's residual-add input norm (the last "
                "layer's: the final norm) -> one launch (torch.ops.vosti.norm_add_rms_norm, the same bits); only "
                "over the stock forward it mirrors, with every layer running vosti's Gemma layer",
                _SETATTR_UNDO, private=False, make=ops_layers.gemma_model_forward,
                applies=ops_layers.is_stock_gemma_model, optional=True)
          for m, cls in (("gemma2", "Gemma2Model"), ("gemma3", "Gemma3Model"))),
        *(Patch("ops", f"vllm.model_executor.models.{m}:{cls}", "forward",
                "the q and k norms -> one launch over the q and k heads of the qkv output, read in place "
                "(torch.ops.vosti.qk_rms_norm, the same bits); only over the stock forward it mirrors",
                _SETATTR_UNDO, private=False, make=ops_layers.qk_norm_attention_forward,
                applies=ops_layers.is_stock_qk_norm_attention, optional=True)
          for m, cls in (("qwen3", "Qwen3Attention"), ("gemma3", "Gemma3Attention"))),
        Patch("ops", "vllm.model_executor.layers.activation:SiluAndMul", "forward",
              "PyTorch's CPU elementwise kernels are not row invariant -> torch.ops.vosti.act_and_mul",
              _SETATTR_UNDO, private=False, make=ops_layers.silu_and_mul_forward),
        Patch("ops", "vllm.model_executor.layers.activation:GeluAndMul", "forward",
              "gelu(tanh) and mul -> torch.ops.vosti.act_and_mul", _SETATTR_UNDO, private=False,
              make=ops_layers.gelu_and_mul_forward),
        Patch("ops", "vllm.distributed.parallel_state:GroupCoordinator", "_all_reduce_out_place",
              "TP all-reduce -> all-gather + rank-order sum (NCCL/gloo/shm pick their summation order by "
              "message size, i.e. by the batch)", _SETATTR_UNDO, private=True,
              make=collectives.all_reduce_out_place),
    ]
    for module in compat.TOP_K_TOP_P_MODULES:
        table.append(Patch(
            "sampling", module, "apply_top_k_top_p",
            "top-k/top-p masks row by row: CUDA -> the proved top_k_top_p_kernel (per-row bisection, no sort, no "
            "host sync), CPU -> its torch reference (stock sorts the batch; results depend on it)", _SETATTR_UNDO,
            private=False, make=lambda stock: sampling_patches.rowwise.apply_top_k_top_p,
            applies=lambda owner: hasattr(owner, "apply_top_k_top_p"), optional=True))
    for module in compat.LOGPROB_TOPK_MODULES:
        table.append(Patch(
            "sampling", module, "torch",
            "the module's torch with a tie-free topk (logprob top-n picks among ties by batch shape)",
            _SETATTR_UNDO, private=False, make=sampling_patches.torch_with_tie_free_topk,
            applies=sampling_patches.module_uses_stock_torch, optional=True))
    table += [
        Patch("sampling", "vllm.v1.sample.ops.topk_topp_sampler:TopKTopPSampler", "__init__",
              "stock init, then forward = vosti's (top_k_top_p_kernel masks, vosti softmax, per-request noise)",
              _SETATTR_UNDO + "; samplers built meanwhile keep vosti's forward", private=False,
              make=sampling_patches.sampler_init),
        Patch("sampling", "vllm.v1.worker.gpu_model_runner:GPUModelRunner", "_bookkeeping_sync",
              "CPU generators of discarded rows restored from the state before the draw (stock rewind crashes)",
              _SETATTR_UNDO, private=True, make=sampling_patches.bookkeeping_sync),
        Patch("sampling", "vllm.v1.engine.input_processor:InputProcessor", "_validate_params",
              "refuse per request (HTTP 400) what vosti cannot make deterministic, before the stock checks",
              _SETATTR_UNDO, private=True, make=sampling_patches.validate_params),
    ]
    return table


EXTENSIONS = (
    Extension("vllm.general_plugins entry point", "vosti_plugin:register (applies the `plugin` group)"),
    Extension("ModelRegistry.register_model(name, 'module:Class')",
              "`plugin` group: the text towers of multimodal checkpoints whose vLLM module cannot be imported "
              "here (vosti_plugin.vllm.text_tower.TEXT_TOWER_MODELS: VostiGemma3TextTowerForCausalLM -> "
              "vosti_plugin.vllm.text_tower_model.Gemma3TextTowerForCausalLM, Gemma3ForCausalLM loading the "
              "Gemma3ForConditionalGeneration checkpoint's text weights, vision tower and projector skipped); "
              "lazy (vLLM imports the class only for a config that names it, which only a vosti engine's "
              "text-tower stand-in writes); undo() puts back what the registry held under each name (or "
              "removes it)", private="ModelRegistry.models read and written to restore the previous entry"),
    Extension("register_backend(AttentionBackendEnum.CUSTOM, ...)",
              "CUSTOM -> vosti_plugin.attention.backend.VostiAttentionBackend; undo() restores the previous "
              "override (or none)", private="registry._ATTN_OVERRIDES read to tell whether CUSTOM is vosti"),
    Extension("--scheduler-cls", "vosti_plugin.scheduler.VostiScheduler (subclass of vLLM's Scheduler / "
              "AsyncScheduler); its Scheduler.__init__ builds VostiKVCacheManager (REBINDINGS)"),
    Extension("KVCacheManager subclass", "VostiKVCacheManager: exact-prefix matching; KVCacheManager.__init__ "
              "with the stock scheduler's arguments, its coordinator builds VostiBlockPool (REBINDINGS)",
              private="per sliding-window manager instance: get_num_skipped_tokens -> 0 and the admission cap "
                      "(max_admission_blocks_per_request; _max_admission_blocks_per_request on 0.26) -> None"),
    Extension("BlockPool subclass", "VostiBlockPool: PageCache policy over the blocks BlockPool.__init__ builds",
              private="after BlockPool.__init__: free_block_queue and cached_block_hash_to_block -> None (the "
                      "PageCache owns free and cached pages; a stock path reaching them fails loudly), "
                      "enable_kv_cache_events -> False, metrics_collector -> None"),
)


REBINDINGS = (
    Rebinding("vllm.v1.core.sched.scheduler", "KVCacheManager", "vosti_plugin.vllm.kv_manager.VostiKVCacheManager",
              "Scheduler.__init__ inside VostiScheduler.__init__",
              "Scheduler.__init__ builds its KV cache manager by this name, with its own arguments"),
    Rebinding("vllm.v1.core.kv_cache_coordinator", "BlockPool", "vosti_plugin.vllm.block_pool.VostiBlockPool",
              "KVCacheManager.__init__ inside VostiKVCacheManager.__init__",
              "KVCacheCoordinator.__init__ builds the block pool every KV cache group shares by this name"),
)


@contextlib.contextmanager
def rebound(owner: str, attribute: str, replacement) -> Iterator[object]:
    """Inside the block `owner.attribute` (one of REBINDINGS) is `replacement`; yields the stock object."""
    if not any((r.owner, r.attribute) == (owner, attribute) for r in REBINDINGS):
        raise ValueError(f"{owner}.{attribute} is not in vosti_plugin.vllm.patches.REBINDINGS")
    module = resolve_owner(owner)
    stock = vars(module).get(attribute)
    if not isinstance(stock, type):
        from vosti_plugin.vllm import compat

        raise RuntimeError(f"vLLM {compat.vllm_version()}: {owner}.{attribute} is not the class vosti expects "
                           f"to rebind (found {stock!r})")
    setattr(module, attribute, replacement)
    try:
        yield stock
    finally:
        setattr(module, attribute, stock)


# ---------------------------------------------------------------- apply / undo


@dataclass
class _Applied:
    patch: Patch
    owner: object
    raw: object        # vars(owner)[attribute] before, or _MISSING
    stock: object      # getattr(owner, attribute) before (what callers of the stock code want)


_applied: dict[str, list[_Applied]] = {g: [] for g in GROUPS}
_custom_backend: dict[str, object] = {}
_registered_models: dict[str, object] = {}   # architecture -> the registry's entry before (None: absent)


def resolve_owner(owner: str):
    """The module or class named by `owner`; ImportError/AttributeError if this vLLM lacks it."""
    module_name, _, path = owner.partition(":")
    obj = importlib.import_module(module_name)
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part)
    return obj


def owners(patch: Patch) -> list:
    try:
        owner = resolve_owner(patch.owner)
    except (ImportError, AttributeError):
        if patch.optional:
            return []
        raise
    return [owner] if patch.applies is None or patch.applies(owner) else []


def is_applied(group: str) -> bool:
    return bool(_applied[group]) or (group == "plugin" and bool(_custom_backend))


def apply(group: str | None = None) -> None:
    """Apply one group (or every group). A group already applied is left as it is."""
    for g in (GROUPS if group is None else (group,)):
        if is_applied(g):
            continue
        try:
            # Resolve (import) every owner before replacing anything: a module that re-exports a patched
            # function (`from ... import apply_top_k_top_p`) and is first imported mid-apply would bind
            # vosti's replacement as its "stock" attribute, and undo would then put vosti's back.
            targets = [(patch, owner) for patch in inventory() if patch.group == g for owner in owners(patch)]
            if g == "plugin":
                _register_custom_backend()
                _register_models()
            for patch, owner in targets:
                _replace(patch, owner)
        except BaseException:
            undo(g)
            raise


def undo(group: str | None = None) -> None:
    """Put back what `apply(group)` (or every apply) replaced, last in first out."""
    for g in (reversed(GROUPS) if group is None else (group,)):
        done = _applied[g]
        while done:
            entry = done.pop()
            if entry.raw is _MISSING:
                delattr(entry.owner, entry.patch.attribute)
            else:
                setattr(entry.owner, entry.patch.attribute, entry.raw)
        if g == "plugin":
            _restore_models()
            _restore_custom_backend()


def original(owner, attribute: str):
    """The stock attribute vosti replaced on `owner` (the current one if vosti did not replace it)."""
    for done in _applied.values():
        for entry in done:
            if entry.owner is owner and entry.patch.attribute == attribute:
                return entry.stock
    return getattr(owner, attribute)


def _replace(patch: Patch, owner) -> None:
    raw = vars(owner).get(patch.attribute, _MISSING)
    stock = getattr(owner, patch.attribute)
    replacement = patch.make(stock)
    setattr(owner, patch.attribute, replacement)
    _applied[patch.group].append(_Applied(patch, owner, raw, stock))


def _register_custom_backend() -> None:
    from vosti_plugin import selection
    from vosti_plugin.vllm import compat

    _custom_backend["before"] = compat.custom_backend_path()
    compat.register_custom_backend(selection.BACKEND_PATH)


def _restore_custom_backend() -> None:
    if not _custom_backend:
        return
    from vosti_plugin.vllm import compat

    before = _custom_backend.pop("before")
    if before is None:
        compat.clear_custom_backend()
    else:
        compat.register_custom_backend(before)


def _register_models() -> None:
    from vosti_plugin.vllm import text_tower

    try:
        _registered_models.update(text_tower.register_text_tower_models())
    except (ImportError, AttributeError) as exc:   # a vLLM without this registry: text models are unaffected
        from vosti_plugin.launch.log import vosti_logger

        vosti_logger().warning("vosti: multimodal checkpoints' text towers are not registered (%s: %s)",
                               type(exc).__name__, exc)


def _restore_models() -> None:
    if not _registered_models:
        return
    from vosti_plugin.vllm import text_tower

    text_tower.unregister_text_tower_models(dict(_registered_models))
    _registered_models.clear()


# ---------------------------------------------------------------- printing


def inventory_table():
    from rich.table import Table

    table = Table(title="attributes of vLLM that vosti replaces (vosti_plugin.vllm.patches)")
    for col in ("group", "owner", "attribute", "why", "undo", "private"):
        table.add_column(col, overflow="fold")
    for p in inventory():
        table.add_row(p.group, p.owner, p.attribute, p.why, p.undo, "yes" if p.private else "no")
    ext = Table(title="extension points vosti plugs into (nothing replaced)")
    for col in ("extension point", "what", "private vLLM state touched"):
        ext.add_column(col, overflow="fold")
    for e in EXTENSIONS:
        ext.add_row(e.point, e.what, e.private or "-")
    rebind = Table(title="vLLM module globals rebound while one stock constructor runs (REBINDINGS)")
    for col in ("owner", "attribute", "built instead", "during", "why"):
        rebind.add_column(col, overflow="fold")
    for r in REBINDINGS:
        rebind.add_row(r.owner, r.attribute, r.replacement, r.during, r.why)
    return table, ext, rebind


def print_inventory(console=None) -> None:
    from rich.console import Console

    console = console or Console(width=200)
    for table in inventory_table():
        console.print(table)


if __name__ == "__main__":
    print_inventory()
