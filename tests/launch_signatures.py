"""What Triton specializes a kernel launch on, read from the launch's own arguments: the constexprs and launch
options, each int argument's class (1, a multiple of 16, other; none for do_not_specialize), each tensor's dtype
and whether its pointer is on 16 bytes. Two launches with the same signature share one compiled kernel."""
import contextlib
import types

import torch


def signature(kernel, args: tuple, kwargs: dict) -> tuple:
    options = getattr(kernel, "kwargs", None) or {}
    unspecialized = set(options.get("do_not_specialize") or getattr(kernel, "do_not_specialize", None) or ())
    parts = []
    for name, value in zip(kernel.arg_names, args):
        if isinstance(value, torch.Tensor):
            parts.append((name, str(value.dtype), value.data_ptr() % 16 == 0))
        elif isinstance(value, bool) or value is None:
            parts.append((name, value))
        elif isinstance(value, int):
            parts.append((name, None if name in unspecialized else
                          "1" if value == 1 else "D" if value % 16 == 0 else ""))
        else:
            parts.append((name, type(value).__name__))
    return (kernel.fn.__name__, tuple(parts), tuple(sorted((k, repr(v)) for k, v in kwargs.items())))


class _Recording:
    def __init__(self, kernel, sink: list, phase: list):
        self._kernel, self._sink, self._phase = kernel, sink, phase

    def __getattr__(self, name):
        return getattr(self._kernel, name)

    def __getitem__(self, grid):
        launch = self._kernel[grid]

        def run(*args, **kwargs):
            self._sink.append((self._phase[0], signature(self._kernel, args, kwargs)))
            return launch(*args, **kwargs)

        return run


@contextlib.contextmanager
def recording(module, names: tuple[str, ...]):
    """Record (phase, signature) of every launch of module's kernels `names`; set the phase by assigning
    rec.phase[0]."""
    sink, phase = [], ["-"]
    saved = {n: getattr(module, n) for n in names}
    for n, kernel in saved.items():
        setattr(module, n, _Recording(kernel, sink, phase))
    try:
        yield types.SimpleNamespace(launches=sink, phase=phase)
    finally:
        for n, kernel in saved.items():
            setattr(module, n, kernel)
