#!/usr/bin/env python3
"""A float64 numpy forward of llama.cpp d32676d's gpt-oss graph (src/models/openai-moe.cpp,
build_moe_ffn, ggml's rope_yarn and soft_max with sinks) on gpt_oss_tiny.gguf, written from
llama.cpp's source as an independent reference (README.md). With --q8 every product with an MXFP4
expert matrix first rounds its activations to q8_0 blocks as ggml's CPU mul_mat does (its
vec_dot_type for MXFP4 is Q8_0), so it reproduces llama.cpp's numbers; without, it is the exact
math.

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 numpy_gpt_oss.py gpt_oss_tiny.gguf \
        1,17,250,3,99,200,42,7,180,128,64,5,201,233,12,77 out.f32 [--q8]
"""
import math
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

D, H, KV, HD, E, K, W = 64, 4, 2, 32, 4, 2, 4  # the fixture's shape (make_gpt_oss_fixture.py)
BASE, FREQ_SCALE, ORIG, EPS = 150000.0, 1 / 32, 4096, 1e-5
Q8 = "--q8" in sys.argv


def load(path):
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        a = np.array(t.data)
        if t.tensor_type == gguf.GGMLQuantizationType.MXFP4:
            a = dequantize(a, t.tensor_type)
        out[t.name] = a.astype(np.float64).reshape([int(x) for x in reversed(t.shape)])
    return out


def q8(x):  # ggml's quantize_row_q8_0: d = amax / 127 (stored f16), q = round half away
    if not Q8:
        return x
    b = x.reshape(-1, 32)
    d = np.abs(b).max(1, keepdims=True) / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0)
    q = np.sign(b * inv) * np.floor(np.abs(b * inv) + 0.5)
    return (q * d.astype(np.float16).astype(np.float64)).reshape(x.shape)


def rms(x, w):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w


def corr(beta):
    return HD * math.log(ORIG / (beta * 2 * math.pi)) / (2 * math.log(BASE))


def rope(x, pos):  # NeoX pairs (i, i + HD/2), YaRN frequencies and magnitude
    lo, hi = max(0, math.floor(corr(32))), min(HD - 1, math.ceil(corr(1)))
    mscale = 1 + 0.1 * math.log(1 / FREQ_SCALE)
    out, half = x.copy(), HD // 2
    for i in range(half):
        extrap = BASE ** (-2 * i / HD)
        ramp = 1 - min(1, max(0, (i - lo) / max(0.001, hi - lo)))
        th = pos * (FREQ_SCALE * extrap * (1 - ramp) + extrap * ramp)
        c, s = np.cos(th)[:, None] * mscale, np.sin(th)[:, None] * mscale
        a, b = x[:, :, i], x[:, :, i + half]
        out[:, :, i], out[:, :, i + half] = a * c - b * s, a * s + b * c
    return out


def attention(T, p, h, n, local):
    q = (h @ T[p + "attn_q.weight"].T + T[p + "attn_q.bias"]).reshape(n, H, HD)
    k = (h @ T[p + "attn_k.weight"].T + T[p + "attn_k.bias"]).reshape(n, KV, HD)
    v = (h @ T[p + "attn_v.weight"].T + T[p + "attn_v.bias"]).reshape(n, KV, HD)
    pos = np.arange(n, dtype=np.float64)
    q, k = rope(q, pos), rope(k, pos)
    out = np.zeros((n, H, HD))
    for hh in range(H):
        g, sink = hh // (H // KV), T[p + "attn_sinks.weight"][hh]
        s = q[:, hh] @ k[:, g].T / math.sqrt(HD)
        i, j = np.indices(s.shape)
        s[(j > i) | (local & (i - j >= W))] = -np.inf
        m = np.maximum(s.max(1), sink)
        e = np.exp(s - m[:, None])
        out[:, hh] = (e / (e.sum(1) + np.exp(sink - m))[:, None]) @ v[:, g]
    return out.reshape(n, -1) @ T[p + "attn_output.weight"].T + T[p + "attn_output.bias"]


def experts(T, p, h):
    logits = h @ T[p + "ffn_gate_inp.weight"].T + T[p + "ffn_gate_inp.bias"]
    out = np.zeros_like(h)
    for i in range(h.shape[0]):
        sel = np.argsort(-logits[i], kind="stable")[:K]
        w = np.exp(logits[i, sel] - logits[i, sel].max())
        for e, wt in zip(sel, w / w.sum()):
            g = T[p + "ffn_gate_exps.weight"][e] @ q8(h[i]) + T[p + "ffn_gate_exps.bias"][e]
            u = T[p + "ffn_up_exps.weight"][e] @ q8(h[i]) + T[p + "ffn_up_exps.bias"][e]
            g, u = np.minimum(g, 7.0), np.clip(u, -7.0, 7.0)
            a = g / (1 + np.exp(-1.702 * g)) * (u + 1)
            out[i] += wt * (T[p + "ffn_down_exps.weight"][e] @ q8(a) + T[p + "ffn_down_exps.bias"][e])
    return out


def main(path, tokens, out):
    T = load(path)
    ids = [int(t) for t in tokens.split(",")]
    x = T["token_embd.weight"][ids]
    for layer in range(4):
        p = f"blk.{layer}."
        x = x + attention(T, p, rms(x, T[p + "attn_norm.weight"]), len(ids), layer % 2 == 0)
        x = x + experts(T, p, rms(x, T[p + "post_attention_norm.weight"]))
    (rms(x, T["output_norm.weight"]) @ T["output.weight"].T).astype("<f4").tofile(out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
