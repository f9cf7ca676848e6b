"""Qwen2.5-Omni's audio tower in float64 numpy, an independent reference of kamera's
(src/audio/audio_encoder.h), written from Hugging Face's Qwen2_5OmniAudioEncoder (conv1 / conv2
with GELU, the sinusoid positions, pre-LN Whisper layers, AvgPool1d(2), ln_post, proj) and run on
the whole 30-s window as llama.cpp's mtmd runs it (no 100-position attention windows):

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 numpy_audio.py mmproj.gguf clip_16k.wav OUT.f32

reads the tower from the mmproj with gguf-py's reader, the clip's log-mel from
tests/unit/media/whisper_mel.py, and writes the projected rows (f32, rows x width).
"""
import math
import os
import sys
import wave

import numpy as np
from gguf import GGUFReader

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../unit/media"))
import whisper_mel  # noqa: E402


def tensors(path):
    r = GGUFReader(path)
    out = {t.name: np.array(t.data, dtype=np.float64).reshape([int(x) for x in reversed(t.shape)])
           for t in r.tensors}
    kv = {f.name: f for f in r.fields.values()}
    return out, kv


def field(kv, name):
    f = kv[name]
    return f.parts[f.data[0]][0]


def layernorm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def conv1d(x, w, b, stride):
    """x: (in, T); w: (out, in, 3); pad 1."""
    xp = np.pad(x, ((0, 0), (1, 1)))
    n = (x.shape[1] - 1) // stride + 1
    cols = np.stack([xp[:, t * stride:t * stride + 3] for t in range(n)])  # n, in, 3
    return np.einsum("nik,oik->on", cols, w) + b.reshape(-1, 1)


def forward(t, kv, mel):
    eps = float(field(kv, "clip.audio.attention.layer_norm_epsilon"))
    heads = int(field(kv, "clip.audio.attention.head_count"))
    layers = int(field(kv, "clip.audio.block_count"))
    x = gelu(conv1d(mel, t["a.conv1d.1.weight"], t["a.conv1d.1.bias"], 1))
    x = gelu(conv1d(x, t["a.conv1d.2.weight"], t["a.conv1d.2.bias"], 2)).T  # positions x dim
    n, d = x.shape
    x = x + t["a.position_embd.weight"][:n]
    hd = d // heads
    for i in range(layers):
        p = f"a.blk.{i}."
        h = layernorm(x, t[p + "ln1.weight"], t[p + "ln1.bias"], eps)
        q = h @ t[p + "attn_q.weight"].T + t[p + "attn_q.bias"]
        k = h @ t[p + "attn_k.weight"].T
        v = h @ t[p + "attn_v.weight"].T + t[p + "attn_v.bias"]
        q, k, v = (a.reshape(n, heads, hd).transpose(1, 0, 2) for a in (q, k, v))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        a = a.transpose(1, 0, 2).reshape(n, d)
        x = x + a @ t[p + "attn_out.weight"].T + t[p + "attn_out.bias"]
        h = layernorm(x, t[p + "ln2.weight"], t[p + "ln2.bias"], eps)
        h = gelu(h @ t[p + "ffn_up.weight"].T + t[p + "ffn_up.bias"])
        x = x + h @ t[p + "ffn_down.weight"].T + t[p + "ffn_down.bias"]
    x = 0.5 * (x[0:n // 2 * 2:2] + x[1:n // 2 * 2:2])  # AvgPool1d(2, stride 2)
    x = layernorm(x, t["a.post_ln.weight"], t["a.post_ln.bias"], eps)
    return x @ t["mm.a.fc.weight"].T + t["mm.a.fc.bias"]


def main():
    t, kv = tensors(sys.argv[1])
    with wave.open(sys.argv[2]) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    mels = whisper_mel.log_mel(pcm.astype(np.float32) / 32768.0)
    rows = np.concatenate([forward(t, kv, m.astype(np.float64)) for m in mels])
    rows.astype(np.float32).tofile(sys.argv[3])


if __name__ == "__main__":
    main()
