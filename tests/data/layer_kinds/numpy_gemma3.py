#!/usr/bin/env python3
"""An independent float64 forward of gemma3-tiny.gguf (numpy, reading the file with llama.cpp's
gguf-py), as llama.cpp's gemma3 graph computes it, at every position of the fixture's tokens.

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 tests/data/layer_kinds/numpy_gemma3.py \
        tests/data/layer_kinds exact    # writes gemma3_numpy_f64_logits.f32
    ... numpy_gemma3.py tests/data/layer_kinds f16     # prints only: GELU rounded as ggml's table

`exact` evaluates GELU (tanh form) in float64; `f16` rounds its input and output to f16 as
ggml's CPU GELU table does (GGML_GELU_FP16), to show where kamera and llama.cpp part (README.md).
`f16-no-window` and `f16-one-base` drop the sliding window, or give the local layers the global
rope base, to show that the file tells them apart.
"""
import json
import sys

import numpy as np
from gguf import GGUFReader

out, mode = sys.argv[1], sys.argv[2]
case = [c for c in json.load(open(f"{out}/llama_cpp_logits.json"))["cases"] if c["arch"] == "gemma3"][0]
r = GGUFReader(f"{out}/{case['file']}")
T = {}
for t in r.tensors:
    shape = [int(x) for x in reversed(t.shape)]
    T[t.name] = np.array(t.data, dtype=np.float64).reshape(shape)
f = r.fields


def key(name):
    v = f[f"gemma3.{name}"]
    return v.parts[v.data[0]][0]


D, L, H, KV = int(key("embedding_length")), int(key("block_count")), int(key("attention.head_count")), int(key("attention.head_count_kv"))
HD, W, EPS, BASE = int(key("attention.key_length")), int(key("attention.sliding_window")), float(key("attention.layer_norm_rms_epsilon")), float(key("rope.freq_base"))
LOCAL_BASE, PERIOD = 10000.0, 6  # no rope.freq_base_swa, no sliding_window_pattern: llama.cpp's defaults
toks = case["tokens"]
n = len(toks)
pos = np.arange(n)


def rms(x, w):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w


def rope(x, base):  # NeoX halves over the whole head
    half = HD // 2
    ang = np.outer(pos, base ** (-np.arange(half) * 2.0 / HD))[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * np.cos(ang) - b * np.sin(ang), a * np.sin(ang) + b * np.cos(ang)], -1)


def gelu(x):
    if mode.startswith("f16"):
        x = x.astype(np.float16).astype(np.float64)
    y = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * x * (1 + 0.044715 * x * x)))
    return y.astype(np.float16).astype(np.float64) if mode.startswith("f16") else y


x = T["token_embd.weight"][toks] * np.sqrt(D)
for l in range(L):
    p = f"blk.{l}."
    local = l % PERIOD < PERIOD - 1
    h = rms(x, T[p + "attn_norm.weight"])
    q = rms((h @ T[p + "attn_q.weight"].T).reshape(n, H, HD), T[p + "attn_q_norm.weight"])
    k = rms((h @ T[p + "attn_k.weight"].T).reshape(n, KV, HD), T[p + "attn_k_norm.weight"])
    v = (h @ T[p + "attn_v.weight"].T).reshape(n, KV, HD)
    base = LOCAL_BASE if local and mode != "f16-one-base" else BASE
    q, k = rope(q, base), rope(k, base)
    seen = pos[:, None] >= pos[None, :]
    if local and mode != "f16-no-window":
        seen &= (pos[:, None] - pos[None, :]) < W
    att = np.zeros((n, H, HD))
    for hh in range(H):
        g = hh // (H // KV)
        s = np.where(seen, q[:, hh] @ k[:, g].T / np.sqrt(HD), -np.inf)
        s = np.exp(s - s.max(1, keepdims=True))
        att[:, hh] = (s / s.sum(1, keepdims=True)) @ v[:, g]
    x = x + rms(att.reshape(n, H * HD) @ T[p + "attn_output.weight"].T, T[p + "post_attention_norm.weight"])
    m = rms(x, T[p + "ffn_norm.weight"])
    y = gelu(m @ T[p + "ffn_gate.weight"].T) * (m @ T[p + "ffn_up.weight"].T)
    x = x + rms(y @ T[p + "ffn_down.weight"].T, T[p + "post_ffw_norm.weight"])
logits = rms(x, T["output_norm.weight"]) @ T["token_embd.weight"].T
ref = np.fromfile(f"{out}/{case['logits']}", dtype=np.float32).reshape(n, -1)
print(f"{mode}: max |numpy - llama.cpp| / max |logit| = {np.abs(logits - ref).max() / np.abs(ref).max():.2e}")
if mode == "exact":
    logits.astype("<f4").tofile(f"{out}/gemma3_numpy_f64_logits.f32")
