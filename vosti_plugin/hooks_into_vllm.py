"""The few places where vosti attaches to vLLM. Each wrapper defers to stock behaviour unless vosti
was selected."""
from __future__ import annotations

import functools
import os

from vosti_plugin import compat, selection


def _accept_vosti_name() -> None:
    """`AttentionBackendEnum["VOSTI"]` resolves to CUSTOM (pointed at our backend)."""
    enum = compat.attention_backend_enum()
    meta = type(enum)
    if getattr(meta.__getitem__, "_vosti", False):
        return
    stock_getitem = meta.__getitem__

    @functools.wraps(stock_getitem)
    def getitem(cls, name):
        if cls is enum and selection.is_vosti_name(name):
            return enum.CUSTOM
        return stock_getitem(cls, name)

    getitem._vosti = True
    meta.__getitem__ = getitem


def _cpu_platform_honours_custom() -> None:
    """The CPU platform ignores --attention-backend; let it honour CUSTOM when CUSTOM is vosti."""
    try:
        cpu = compat.cpu_platform_class()
    except ImportError:
        return
    stock = cpu.get_attn_backend_cls
    if getattr(stock, "_vosti", False):
        return
    stock_fn = stock.__func__
    enum = compat.attention_backend_enum()

    def get_attn_backend_cls(cls, selected_backend, *args, **kwargs):
        if selected_backend is enum.CUSTOM and compat.custom_backend_path() == selection.BACKEND_PATH:
            return selection.BACKEND_PATH
        return stock_fn(cls, selected_backend, *args, **kwargs)

    get_attn_backend_cls._vosti = True
    cpu.get_attn_backend_cls = classmethod(get_attn_backend_cls)


def _engine_args_apply_vosti() -> None:
    engine_args = compat.engine_args_class()
    stock = engine_args.create_engine_config
    if getattr(stock, "_vosti", False):
        return

    @functools.wraps(stock)
    def create_engine_config(self, *args, **kwargs):
        requested = selection.requested_in_engine_args(self)
        if requested:
            selection.prepare_engine_args(self)
        config = stock(self, *args, **kwargs)
        if requested or selection.selected_in_config(config):
            selection.activate(config)
        else:
            selection.deactivate()
        return config

    create_engine_config._vosti = True
    engine_args.create_engine_config = create_engine_config


def install() -> None:
    compat.register_custom_backend(selection.BACKEND_PATH)
    _accept_vosti_name()
    _cpu_platform_honours_custom()
    _engine_args_apply_vosti()
    if os.environ.get(selection.ACTIVE_ENV) == "1":
        selection.install_runtime()
