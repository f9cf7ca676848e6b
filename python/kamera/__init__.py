"""kamera: a CPU inference engine with a position-free KV cache, from Python.

    import kamera
    model = kamera.Model("stories260K.gguf")
    ctx = kamera.Context(model)
    a = kamera.Chunk(model, model.tokenize(" Lily had a red ball.", raw=True))
    b = kamera.Chunk(model, model.tokenize(" The ball rolled away.", raw=True))
    ctx.cache(b)                                   # KV(b | BOS), position-free
    seq = ctx.assemble([a, b], policy="patch", rank=8)   # b reused behind a, patched
    logits = seq.eval(model.tokenize(" Lily was", raw=True), logits="all")

The classes wrap the public C API (include/kamera.h, libkamera.so); docs/API.md describes both.
Handles are not thread-safe: a Context and what it serves (sequences, windows) must not be used
from two threads at once; distinct contexts may run in parallel (heavy calls release the GIL).
Failures raise kamera.Error with .code (the C API's status) and .name ("not_found", ...); an
argument of the wrong type raises kamera.ArgumentError, which is a kamera.Error and a TypeError.

libkamera is found where the module was built against it (its RUNPATH), or at the path in the
environment variable KAMERA_LIBRARY, loaded first when set.
"""
import functools as _functools
import inspect as _inspect
import os as _os
import re as _re

if _os.environ.get("KAMERA_LIBRARY"):
    import ctypes as _ctypes

    _ctypes.CDLL(_os.environ["KAMERA_LIBRARY"], mode=_ctypes.RTLD_GLOBAL)

from ._kamera import (  # noqa: E402,F401
    FULL_RANK,
    ArgumentError,
    Chunk,
    Context,
    Error,
    Model,
    Sampler,
    Sequence,
    Vision,
    Window,
    __version__,
    minivl,
)

__all__ = ["Model", "Context", "Chunk", "Sequence", "Window", "Sampler", "Vision", "Error",
           "ArgumentError", "FULL_RANK", "minivl"]


class _Default:
    """A default value as pybind11's docstring spells it (shown by help() as it is)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _split_top(params):
    """Splits "a: int, b: List[int] = [1, 2]" at the commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in params:
        depth += ch in "[(" and 1 or (ch in "])" and -1 or 0)
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def _signature(fn):
    """The Python signature in the first line of a pybind11 docstring (None when overloaded)."""
    first = (fn.__doc__ or "").strip().split("\n", 1)[0]
    m = _re.match(r"^\w+\((.*)\)(?: -> (.+))?$", first)
    if not m:
        return None
    empty, params = _inspect.Parameter.empty, []
    try:
        for part in _split_top(m.group(1)):
            name, _, rest = part.partition(": ")
            ann, _, default = rest.partition(" = ")
            params.append(_inspect.Parameter(name, _inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                             annotation=ann or empty,
                                             default=_Default(default) if default else empty))
        return _inspect.Signature(params, return_annotation=m.group(2) or empty)
    except ValueError:
        return None


def _argument_errors(fn):
    """pybind11's TypeError for arguments of the wrong type, as kamera.ArgumentError (its message
    lists the call's parameters with their names and types)."""

    @_functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            if isinstance(e, Error) or "incompatible" not in str(e):
                raise
            err = ArgumentError(str(e))
            err.code, err.name = 1, "invalid_argument"
            raise err from None

    sig = _signature(fn)
    if sig is not None:
        call.__signature__ = sig
    return call


def _wrap(namespace, names=None):
    for name in names or list(vars(namespace)):
        attr = vars(namespace).get(name)
        if name.startswith("__") and name != "__init__":
            continue
        if isinstance(attr, staticmethod):
            setattr(namespace, name, staticmethod(_argument_errors(attr.__func__)))
        elif callable(attr) and not isinstance(attr, type):
            setattr(namespace, name, _argument_errors(attr))


for _cls in (Model, Context, Chunk, Sequence, Window, Sampler, Vision, minivl.Frame,
             minivl.Question):
    _wrap(_cls)
for _name in ("stream", "questions", "words", "word_id"):
    setattr(minivl, _name, _argument_errors(getattr(minivl, _name)))
