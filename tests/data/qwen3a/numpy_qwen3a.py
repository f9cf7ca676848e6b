"""Qwen3-Omni / Qwen3-ASR's audio tower in float64 numpy, an independent reference of kamera's
(src/audio/qwen3_audio_encoder.h), written from llama.cpp d32676d's graph and preprocessor
(tools/mtmd/models/qwen3a.cpp, mtmd_audio_preprocessor_qwen3a) and Hugging Face's module names:

  mel      tests/unit/media/whisper_mel.py's centered_log_mel: Whisper's filters and log10 on the
           clip reflect-padded by 200 samples at both ends (no 30 s of zeros), n / 160 + 1
           frames, max(x, max - 8), (x + 4) / 4 over all of them
  windows  800 frames each (the last shorter), zero-padded to whole chunks of 100 frames
  chunk    conv2d1..3 (k 3, stride 2, pad 1) + GELU on the chunk as a 1 x 128 x 100 image, then
           conv_out on each time step's (channel, mel) values and pos[0..12]
  window   pre-LN layers over the window's rows together, ln_post, proj2(gelu(proj1 x))

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 numpy_qwen3a.py mmproj.gguf clip_16k.wav OUT.f32

reads the tower with gguf-py's reader and writes the projected rows (f32, rows x width).
"""
import math
import os
import sys
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../unit/media"))
sys.path.insert(0, os.path.join(HERE, "../qwen25o"))
import whisper_mel  # noqa: E402
from numpy_audio import field, gelu, layernorm, tensors  # noqa: E402

CHUNK, WINDOW = 100, 800


def windows(mel):
    out = []
    for off in range(0, mel.shape[1], WINDOW):
        w = mel[:, off:off + WINDOW]
        pad = -w.shape[1] % CHUNK
        out.append(np.pad(w, ((0, 0), (0, pad))))
    return out


def conv2d(x, w, b):
    """x: (in, H, W); w: (out, in, 3, 3); stride 2, pad 1."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    oh, ow = (x.shape[1] - 1) // 2 + 1, (x.shape[2] - 1) // 2 + 1
    out = np.zeros((w.shape[0], oh, ow))
    for kh in range(3):
        for kw in range(3):
            patch = xp[:, kh:kh + 2 * oh:2, kw:kw + 2 * ow:2]  # in, oh, ow
            out += np.einsum("ihw,oi->ohw", patch, w[:, :, kh, kw])
    return out + b.reshape(-1, 1, 1)


def chunk_rows(t, x):
    for i in (1, 2, 3):
        x = gelu(conv2d(x, t[f"a.conv2d.{i}.weight"], t[f"a.conv2d.{i}.bias"]))
    c, f, n = x.shape
    x = x.transpose(2, 0, 1).reshape(n, c * f)  # time, (channel, mel)
    return x @ t["a.conv_out.weight"].T + t["a.position_embd.weight"][:n]


def layers(t, kv, x):
    eps = float(field(kv, "clip.audio.attention.layer_norm_epsilon"))
    heads = int(field(kv, "clip.audio.attention.head_count"))
    n, d = x.shape
    hd = d // heads
    for i in range(int(field(kv, "clip.audio.block_count"))):
        p = f"a.blk.{i}."
        h = layernorm(x, t[p + "ln1.weight"], t[p + "ln1.bias"], eps)
        q, k, v = (h @ t[p + s + ".weight"].T + t[p + s + ".bias"] for s in ("attn_q", "attn_k", "attn_v"))
        q, k, v = (a.reshape(n, heads, hd).transpose(1, 0, 2) for a in (q, k, v))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(n, d)
        x = x + a @ t[p + "attn_out.weight"].T + t[p + "attn_out.bias"]
        h = layernorm(x, t[p + "ln2.weight"], t[p + "ln2.bias"], eps)
        h = gelu(h @ t[p + "ffn_up.weight"].T + t[p + "ffn_up.bias"])
        x = x + h @ t[p + "ffn_down.weight"].T + t[p + "ffn_down.bias"]
    return layernorm(x, t["a.post_ln.weight"], t["a.post_ln.bias"], eps)


def forward(t, kv, mel):
    x = np.concatenate([chunk_rows(t, mel[None, :, c:c + CHUNK]) for c in range(0, mel.shape[1], CHUNK)])
    x = layers(t, kv, x)
    x = gelu(x @ t["mm.a.mlp.1.weight"].T + t["mm.a.mlp.1.bias"])
    return x @ t["mm.a.mlp.2.weight"].T + t["mm.a.mlp.2.bias"]


def main():
    t, kv = tensors(sys.argv[1])
    with wave.open(sys.argv[2]) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    mel = whisper_mel.centered_log_mel(pcm.astype(np.float32) / 32768.0)
    rows = np.concatenate([forward(t, kv, m) for m in windows(mel)])
    rows.astype(np.float32).tofile(sys.argv[3])


if __name__ == "__main__":
    main()
