"""The `plugin` group of vosti_plugin.vllm.patches: what `register()` attaches to vLLM in every process.
Each replacement defers to the stock code unless vosti was selected."""
from __future__ import annotations

import functools
import os

from vosti_plugin import selection
from vosti_plugin.vllm import compat


def accept_vosti_name(stock_getitem):
    """AttentionBackendEnum["VOSTI"] resolves to CUSTOM (pointed at vosti's backend)."""
    enum = compat.attention_backend_enum()

    @functools.wraps(stock_getitem)
    def getitem(cls, name):
        if cls is enum and selection.is_vosti_name(name):
            return enum.CUSTOM
        return stock_getitem(cls, name)

    return getitem


def cpu_honours_custom(stock):
    """The CPU platform ignores --attention-backend; let it honour CUSTOM when CUSTOM is vosti."""
    stock_fn = stock.__func__
    enum = compat.attention_backend_enum()

    def get_attn_backend_cls(cls, selected_backend, *args, **kwargs):
        if selected_backend is enum.CUSTOM and compat.custom_backend_path() == selection.BACKEND_PATH:
            return selection.BACKEND_PATH
        return stock_fn(cls, selected_backend, *args, **kwargs)

    return classmethod(get_attn_backend_cls)


def engine_args_apply_vosti(stock):
    @functools.wraps(stock)
    def create_engine_config(self, *args, **kwargs):
        requested = selection.requested_in_engine_args(self)
        if requested:
            compat.require_supported_vllm()
            selection.prepare_engine_args(self)
            serve_text_tower(self)
        config = stock(self, *args, **kwargs)
        if requested or selection.selected_in_config(config):
            selection.activate(config)
        else:
            selection.deactivate()
        return config

    return create_engine_config


def serve_text_tower(engine_args) -> None:
    """A multimodal checkpoint whose vLLM module cannot be imported here (Gemma-3 without torchvision) is
    served as its text tower (vosti_plugin.vllm.text_tower); say so once, in vLLM's log."""
    from vosti_plugin.launch.log import vosti_logger
    from vosti_plugin.vllm.text_tower import text_tower_stand_in

    stand_in = text_tower_stand_in(engine_args)
    if stand_in is not None:
        vosti_logger().warning("%s", stand_in.serve_note())


def install() -> None:
    from vosti_plugin.vllm import patches

    try:
        patches.apply("plugin")
    except Exception as exc:
        unsupported = compat.unsupported_message(compat.vllm_version())
        if unsupported is None:
            raise
        # Stock vLLM must keep working for everyone who has vosti installed but does not select it.
        selection.logger.warning("%s; vosti is not loaded (%s: %s)", unsupported, type(exc).__name__, exc)
        return
    if os.environ.get(selection.ACTIVE_ENV) == "1":
        selection.install_runtime()
