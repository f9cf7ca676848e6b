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
Failures raise kamera.Error with .code (the C API's status) and .name ("not_found", ...).
"""
from ._kamera import (  # noqa: F401
    FULL_RANK,
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
           "FULL_RANK", "minivl"]
