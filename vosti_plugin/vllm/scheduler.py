"""VostiScheduler / VostiAsyncScheduler: vLLM's schedulers (FCFS, chunked prefill at any budget,
preemption by recompute) with the exact-prefix KV manager in place of vLLM's: the stock Scheduler.__init__
builds VostiKVCacheManager with its own arguments (vosti_plugin.vllm.patches.REBINDINGS).

Per step: every prefix lookup of the step happens inside `schedule()`; full pages are only staged
when they are allocated or filled (inside `schedule()`, or in `update_from_output` under async
scheduling) and are published at the end of `schedule()`, so no lookup can hit a page whose KV the
same step is still writing. A preempted request frees its pages; its registered pages hold correct
KV and may serve its own resumption; the last token of every lookup is always recomputed.

`vosti_plugin.scheduler.VostiScheduler` (the default `scheduler_cls`) follows the final config: vLLM decides
async scheduling after our engine arguments are applied (on where it supports it, off on its CPU platform),
so constructing `VostiScheduler` gives a `VostiAsyncScheduler` whenever `scheduler_config.async_scheduling`
ended up on.
"""
from __future__ import annotations

import functools

from vllm.v1.core.sched.async_scheduler import AsyncScheduler

from vosti_plugin.vllm import compat, patches
from vosti_plugin.kvcache.audit import audit_requested
from vosti_plugin.vllm.kv_manager import VostiKVCacheManager


class _VostiScheduling:
    """Shared by both schedulers; placed before the vLLM scheduler class in the MRO."""

    def _init_with_vosti_kv_manager(self, args, kwargs) -> None:
        """Refuse what vosti cannot schedule before vLLM builds anything, then vLLM's own __init__, which
        builds VostiKVCacheManager where it builds its KVCacheManager."""
        from vosti_plugin.launch.check import check_in_engine_process

        vllm_config = _vllm_config(args, kwargs)
        check_in_engine_process(vllm_config, where="scheduler")
        if getattr(vllm_config, "kv_transfer_config", None) is not None:
            raise ValueError("vosti's KV cache does not support KV connectors (disaggregated prefill/offload)")
        spec = getattr(vllm_config, "speculative_config", None)
        if spec is not None and spec.num_speculative_tokens:
            raise ValueError("vosti does not support speculative decoding (draft slots are rewritten)")
        policy = vllm_config.scheduler_config.policy
        policy = getattr(policy, "value", policy)
        if policy != "fcfs":
            raise ValueError(f"vosti schedules first-come-first-served; got policy={policy!r}")
        self.vosti_audit = audit_requested(getattr(vllm_config, "additional_config", None))
        manager = functools.partial(VostiKVCacheManager, audit=self.vosti_audit)
        with patches.rebound("vllm.v1.core.sched.scheduler", "KVCacheManager", manager):
            super().__init__(*args, **kwargs)
        if not isinstance(self.kv_cache_manager, VostiKVCacheManager):
            raise RuntimeError(f"vLLM {compat.vllm_version()} built a {type(self.kv_cache_manager).__name__}, not "
                               "VostiKVCacheManager (vosti_plugin.vllm.patches.REBINDINGS is out of date)")
        self.vosti_num_preemptions = 0

    def schedule(self, *args, **kwargs):
        manager: VostiKVCacheManager = self.kv_cache_manager
        try:
            output = super().schedule(*args, **kwargs)
            if self.vosti_audit:
                manager.audit_step_writes(output.num_scheduled_tokens, self.requests)
        except BaseException:
            manager.discard_staged()
            raise
        manager.publish_step()
        return output

    def _preempt_request(self, request, *args, **kwargs) -> None:
        self.vosti_num_preemptions += 1
        super()._preempt_request(request, *args, **kwargs)


def _vllm_config(args, kwargs):
    return kwargs.get("vllm_config", args[0] if args else None)


def _async_scheduling_on(args, kwargs) -> bool:
    vllm_config = _vllm_config(args, kwargs)
    return bool(getattr(getattr(vllm_config, "scheduler_config", None), "async_scheduling", False))


class VostiScheduler(_VostiScheduling, compat.scheduler_base()):
    @classmethod
    def class_built(cls, async_scheduling: bool) -> type:
        """The class that constructing `cls` gives under this async setting."""
        return VostiAsyncScheduler if cls is VostiScheduler and async_scheduling else cls

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls.class_built(_async_scheduling_on(args, kwargs)))

    def __init__(self, *args, **kwargs) -> None:
        self._init_with_vosti_kv_manager(args, kwargs)


class VostiAsyncScheduler(VostiScheduler, AsyncScheduler):
    """MRO: VostiScheduler's hooks, then AsyncScheduler's placeholders, then vLLM's Scheduler."""
