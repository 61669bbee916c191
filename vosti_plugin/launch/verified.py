"""Which kernel configs a geometry launches, and whether the verifier proved each of them."""
from __future__ import annotations

import dataclasses

import torch

from vosti_plugin.launch.facts import LaunchFacts

VOCAB_PADDING = 64   # vLLM pads the (parallel) embedding and lm_head rows to a multiple of this


def linear_shapes(f: LaunchFacts) -> dict[str, tuple[int, int]]:
    """(N, K) of every linear layer one rank of a Llama/Qwen/Gemma-style decoder launches. The head counts
    are already per rank (vLLM divides them); column-parallel layers split N, row-parallel ones K."""
    tp = max(1, f.tensor_parallel)
    q = f.num_q_heads * f.head_size
    kv = f.num_kv_heads * f.head_size
    vocab = f.vocab_size if tp == 1 else -(-f.vocab_size // VOCAB_PADDING) * VOCAB_PADDING // tp
    return {
        "qkv_proj": (q + 2 * kv, f.hidden_size),
        "o_proj": (f.hidden_size, q),
        "gate_up_proj": (2 * f.intermediate_size // tp, f.hidden_size),
        "down_proj": (f.hidden_size, f.intermediate_size // tp),
        "lm_head": (vocab, f.hidden_size),
    }


def kernel_configs_for(f: LaunchFacts) -> dict:
    from vosti_plugin.attention.config import (fold_config, fused_prefill_from, launched_decode_config,
                                               prefill_config)
    from vosti_plugin.attention.config import select_config as attention_config
    from vosti_plugin.ops.matmul import (MID_MIN_ROWS, TALL_MIN_ROWS, mid_config, mid_path_on, tall_config,
                                         tall_path_on, tma_cols_path, tma_config, tma_path_on)
    from vosti_plugin.ops.matmul import select_config as matmul_config

    dtype = getattr(torch, f.dtype)
    attention = attention_config(f.head_size, f.num_q_heads, f.num_kv_heads, f.page_size, dtype)
    configs = {"paged_attention": dataclasses.asdict(attention)}
    decode = launched_decode_config(attention)
    if decode != attention:
        configs["paged_attention/decode"] = dataclasses.asdict(decode)
    if fused_prefill_from(dtype, attention.queries_per_kv):
        configs["paged_attention/prefill"] = dataclasses.asdict(prefill_config(attention, f.head_size, f.page_size))
        configs["paged_attention/fold"] = dataclasses.asdict(fold_config(attention, f.head_size))
    for name, (n, k) in linear_shapes(f).items():
        if n and k:
            config = matmul_config(n, k, dtype)
            configs[f"matmul/{name}"] = {"N": n, "K": k, **dataclasses.asdict(config)}
            if mid_path_on(MID_MIN_ROWS) and mid_config(config) != config:   # 64+ rows below the tall path
                configs[f"matmul/{name}/mid"] = {"N": n, "K": k, **dataclasses.asdict(mid_config(config))}
            if tall_path_on(TALL_MIN_ROWS, dtype):   # prefill-sized GEMMs launch these too
                configs[f"matmul/{name}/tall"] = {"N": n, "K": k, **dataclasses.asdict(tall_config(config, dtype))}
                if tma_path_on():
                    tma = tma_config(config, dtype)
                    configs[f"matmul/{name}/tma"] = {"N": n, "K": k, **dataclasses.asdict(tma)}
                    cols = tma_cols_path(n, tma, dtype)
                    if cols is not None:
                        configs[f"matmul/{name}/tma-cols"] = {"N": n, "K": k, **dataclasses.asdict(cols)}
    return configs


@dataclasses.dataclass(frozen=True)
class UnprovedLaunch:
    kernel: str          # "paged_attention", "matmul/qkv_proj", ...
    config: dict         # the launch-config fields the verifier keys its proofs by
    in_catalog: bool     # the catalog lists this config (its proof failed) vs a config outside the catalog

    def label(self) -> str:
        return f"{self.kernel} {self.config}"


_proof_views: dict[str, tuple[frozenset, frozenset]] = {}   # by proof-cache dir, kernel sources, wanted set


# Families whose every launch config follows from the geometry alone (one attention config per model), so a
# deployment needs only their proofs of that config at its geometry. The others are proved whole: GEMMs, norms
# and softmax also run through aten overrides on shapes no launch fact names, and their proofs are cheap (a
# tenth of the catalog's proof time; attention is the rest).
EXACT_FAMILIES = ("paged_attention",)


def geometry_pins(f: LaunchFacts) -> dict[str, tuple]:
    """family -> (constexpr, the values this deployment's launches of it pass), sorted, for the EXACT_FAMILIES:
    its head dim, page size and dtype's; the soft cap where its model caps attention logits; window masks where
    it has a sliding window (its global layers too: both values)."""
    from vosti_plugin.attention.paged_attention import geometry_constexprs

    attention = {name: (value,) for name, value in
                 geometry_constexprs(f.head_size, f.page_size, getattr(torch, f.dtype)).items()}
    attention.update(USE_SOFT_CAP=(f.attention_soft_cap,),
                     USE_WINDOW=(False, True) if f.sliding_window else (False,))
    return {"paged_attention": tuple(sorted(attention.items()))}


def layer_outside_pins(f: LaunchFacts, soft_cap: bool, window: bool) -> str | None:
    """Why an attention layer built with this soft cap and window would launch configs this deployment's proofs
    do not cover (geometry_pins read them from the model config: an architecture passing them another way), or
    None."""
    pins = dict(geometry_pins(f)["paged_attention"])
    wrong = [f"{name}={value}" for name, value in (("USE_SOFT_CAP", soft_cap), ("USE_WINDOW", window))
             if value not in pins[name]]
    if not wrong:
        return None
    return (f"an attention layer launches {', '.join(wrong)}, but the launch check read soft cap "
            f"{f.attention_soft_cap} and sliding window {f.sliding_window} from the model config and proved only "
            f"{dict((n, pins[n]) for n in ('USE_SOFT_CAP', 'USE_WINDOW'))}")


def wanted_configs(f: LaunchFacts, configs: dict | None = None) -> dict[str, set]:
    """family -> (launch config, pins) of each launch config this deployment selects (sorted items), for the
    EXACT_FAMILIES (verifier.api.wants); `configs`: kernel_configs_for(f) where the caller has it."""
    pins = geometry_pins(f)
    wanted: dict[str, set] = {family: set() for family in EXACT_FAMILIES}
    for kernel, cfg in (configs if configs is not None else kernel_configs_for(f)).items():
        family = kernel.split("/")[0]
        if family in wanted:
            wanted[family].add((_config_item(cfg), pins[family]))
    return wanted


def _config_item(cfg: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in cfg.items() if k not in ("N", "K")))


def _proof_view(wanted: dict[str, set]) -> tuple[frozenset, frozenset]:
    """(proved, catalog) as sets of (family, sorted config items), proved as this deployment launches them
    (`wanted`).  From the whole catalog's stored verification when there is one; else only the proofs this
    deployment needs are run (its attention configs at its geometry, every other family whole), with a line
    per finished proof, cached like the catalog's."""
    from vosti_plugin.verifier.api import (_fingerprint, cached_results, catalog_entries, default_cache_dir,
                                           proved_configs, verify_configs)

    fp = f"{default_cache_dir()}|{_fingerprint(None) or ''}|{sorted((k, sorted(v)) for k, v in wanted.items())}"
    if fp in _proof_views:
        return _proof_views[fp]
    results = cached_results()   # the whole catalog's rows: read once (29,665 rows, about a second)
    if results is None:
        results = verify_configs(wanted, on_group=_log_proof)
    proved = frozenset(proved_configs(results, wanted=wanted))
    catalog = frozenset((e["family"], tuple(sorted(fam.items()))) for e in catalog_entries() for _cfg, fam in e["configs"])
    _proof_views[fp] = (proved, catalog)
    return proved, catalog


def _log_proof(done: int, todo: int, group, summary: dict) -> None:
    from vosti_plugin.launch.log import vosti_logger

    log = vosti_logger()
    if done == 1:
        from vosti_plugin.launch.prove_ahead import proved_ahead

        ahead = proved_ahead()
        log.info("vosti: no proofs cached for these kernel sources; proving the %d kernel config groups this "
                 "deployment launches%s (`vosti verify` proves the whole catalog ahead of time)", todo,
                 f" ({ahead} more proved while vLLM loaded)" if ahead else "")
    log.info("vosti: proof %d/%d %s %s: %s in %.1f s", done, todo, group.kernel, group.goal, summary["status"],
             summary["seconds"])


def unproved_launches(f: LaunchFacts) -> list[UnprovedLaunch]:
    """Kernel configs this launch uses that the verifier did not prove (empty when all are proved)."""
    configs = kernel_configs_for(f)
    proved, catalog = _proof_view(wanted_configs(f, configs))
    missing = []
    for kernel, cfg in configs.items():
        item = (kernel.split("/")[0], _config_item(cfg))
        if item not in proved:
            missing.append(UnprovedLaunch(kernel, dict(item[1]), item in catalog))
    return missing


def unverified_configs(f: LaunchFacts) -> list[str]:
    return [m.label() for m in unproved_launches(f)]
