"""Writes a tiny random Qwen2.5-Omni pair with llama.cpp's gguf-py, in the layout its converter
writes (conversion/qwenvl.py, Qwen25OmniModel: one mmproj with both halves, clip.projector_type
"qwen2.5o"; the thinker as a qwen2vl decoder), and a WAV clip:

  the audio half    Qwen25AudioModel: Whisper's conv1d front end (conv1 k3, conv2 k3 stride 2;
                    weights f16 as tensor_force_quant writes them, biases (d, 1)), the sinusoid
                    position table of 1500 rows the converter generates (SinusoidsPositionEmbedding),
                    pre-LN layers (self_attn_layer_norm -> ln1, q / v with bias, k without,
                    out_proj -> attn_out, final_layer_norm -> ln2, fc1 / fc2 -> ffn_up / ffn_down),
                    ln_post -> a.post_ln, proj -> mm.a.fc; clip.audio.* keys, 128 mel bins
  the vision half   Qwen2VLVisionModel (qwen2.5: RMSNorm, gated SiLU MLP, the Conv3D split into
                    v.patch_embd.weight / .weight.1, merger mm.0 / mm.2; a window layer and a full
                    one), what the converter writes for Qwen2.5-Omni, read as a Qwen2.5-VL tower
  the decoder       qwen2vl (Qwen2VLModel: the thinker's text model), M-RoPE sections [2, 3, 3, 0],
                    a byte-level BPE vocabulary with Qwen2.5-Omni's <|audio_bos|> / <|audio_eos|>
  clip_16k.wav      2 s at 16 kHz, mono 16-bit PCM: a chirp with harmonics and a beat, so neither
                    side resamples

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_qwen25o_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf and OUT_DIR/clip_16k.wav; the same bytes on every
run (tests/data/qwen25o/README.md).
"""
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fixture_gguf import byte_units, rnd, sinusoids  # noqa: E402,F401 (importable from here)
import fixture_gguf as fg  # noqa: E402

# The audio tower: width 32, 2 layers, 4 heads, MLP 48, 128 mel bins, projected to the decoder's 64.
A = dict(dim=32, layers=2, heads=4, ffn=48, mels=128, eps=1e-5, n_pos=1500)
# The vision half: width 32, 2 layers, 2 heads, MLP 48, patch 14; layer 0 attends in windows, layer 1
# fully (n_wa_pattern 2, as the model's full-attention layers 7, 15, 23, 31 are every 8th; llama.cpp
# d32676d cannot run n_wa_pattern 1). Layer 0, the patch embedding and the merger are drawn first
# from the file's generator (as when the half had one layer), layer 1 last from its own, so the
# audio half's draws, and its references, are what they were.
V = dict(dim=32, layers=2, heads=2, ffn=48, patch=14, image_size=56, eps=1e-6, n_wa_pattern=2)
# The decoder: qwen2vl of width 64, 2 layers, 4 heads of which 2 KV heads, MLP 96, tied output.
T = dict(dim=64, layers=2, heads=4, kv_heads=2, ffn=96, ctx=2048, eps=1e-6, theta=1000000.0,
         sections=[2, 3, 3, 0])
SEED = 11
CLIP_MEAN, CLIP_STD = fg.CLIP_MEAN, fg.CLIP_STD


def vocabulary():
    """256 byte tokens, a few merges, then Qwen2.5-Omni's chat, audio and vision tokens
    (control)."""
    return fg.bpe_vocabulary(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>",
                              "<|audio_bos|>", "<|audio_eos|>", "<|IMAGE|>", "<|vision_bos|>",
                              "<|vision_eos|>", "<|vision_start|>", "<|vision_end|>"])


def audio_tensors(w, rng):
    d, m = A["dim"], A["mels"]
    # Conv1d weights (out, in, k) as f16, biases unsqueezed to (d, 1)
    w.add_tensor("a.conv1d.1.weight", rnd(rng, (d, m, 3), "w", 3 * m).astype(np.float16))
    w.add_tensor("a.conv1d.1.bias", rnd(rng, (d, 1), "b"))
    w.add_tensor("a.conv1d.2.weight", rnd(rng, (d, d, 3), "w", 3 * d).astype(np.float16))
    w.add_tensor("a.conv1d.2.bias", rnd(rng, (d, 1), "b"))
    w.add_tensor("a.position_embd.weight", sinusoids(A["n_pos"], d))
    fg.whisper_layers(w, rng, A, k_bias=False)  # k_proj has no bias
    fg.linear(w, rng, "mm.a.fc", T["dim"], d)  # proj


def vision_block(w, rng, i):
    d, f = V["dim"], V["ffn"]
    b = f"v.blk.{i}."
    for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
        fg.linear(w, rng, b + n, d, d)
    w.add_tensor(b + "ln1.weight", rnd(rng, (d,), "n"))
    w.add_tensor(b + "ln2.weight", rnd(rng, (d,), "n"))
    for n, n_out, n_in in (("ffn_gate", f, d), ("ffn_up", f, d), ("ffn_down", d, f)):
        fg.linear(w, rng, b + n, n_out, n_in)


def vision_tensors(w, rng):
    """The patch embedding, block 0, post_ln and the merger (blocks 1.. come after the audio half)."""
    d, p = V["dim"], V["patch"]
    w.add_tensor("v.patch_embd.weight", rnd(rng, (d, 3, p, p), "w", 6 * p * p))
    w.add_tensor("v.patch_embd.weight.1", rnd(rng, (d, 3, p, p), "w", 6 * p * p))
    vision_block(w, rng, 0)
    w.add_tensor("v.post_ln.weight", rnd(rng, (d,), "n"))
    fg.linear(w, rng, "mm.0", 4 * d, 4 * d)
    fg.linear(w, rng, "mm.2", T["dim"], 4 * d)


def write_mmproj(path, rng):
    w = fg.mmproj_writer(path)
    # MmprojModel.set_gguf_parameters (both encoders), then Qwen2VLVisionModel's, Qwen25AudioModel's
    # and Qwen25OmniModel's
    fg.vision_keys(w, T["dim"], V, CLIP_MEAN, CLIP_STD)
    fg.audio_keys(w, T["dim"], A)
    # n_wa_pattern 2: fullatt_block_indexes [1]
    fg.add_keys(w, clip_projector_type=gguf.VisionProjectorType.QWEN25O, vision_use_silu=True,
                vision_n_wa_pattern=V["n_wa_pattern"], vision_attention_layernorm_eps=V["eps"],
                audio_num_mel_bins=A["mels"], audio_attention_layernorm_eps=A["eps"])
    vision_tensors(w, rng)
    audio_tensors(w, rng)
    extra = np.random.default_rng(SEED + 2)
    for i in range(1, V["layers"]):
        vision_block(w, extra, i)
    fg.finish(w)


def write_decoder(path, rng):
    fg.write_bpe_decoder(path, rng, "qwen2vl", "kamera tiny Qwen2.5-Omni thinker", T, vocabulary(),
                         fg.QWEN2_TOKENS, lambda w: w.add_rope_dimension_sections(T["sections"]),
                         qkv_bias=True)


def sound(rate, seconds=2.0):
    """A chirp with two harmonics and a slow beat, peak about 0.6."""
    return fg.chirp(rate, seconds, sweep=400)


def write_wav(path, rate, channels):
    fg.write_wav(path, sound(rate), rate, channels)


def main():
    fg.run(SEED, write_mmproj, write_decoder, [
        ("clip_16k.wav", lambda p: write_wav(p, 16000, 1))])


if __name__ == "__main__":
    main()
