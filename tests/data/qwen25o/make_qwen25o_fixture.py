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
import struct
import sys

import numpy as np
import gguf

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
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def byte_units():
    """GPT-2's byte -> printable unicode table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def vocabulary():
    """256 byte tokens, a few merges, then Qwen2.5-Omni's chat, audio and vision tokens."""
    u = byte_units()
    tokens = [u[b] for b in range(256)]
    types = [1] * 256
    merges = []
    for a, b in [("Ċ", "Ċ"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]:
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(1)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>",
                "<|audio_eos|>", "<|IMAGE|>", "<|vision_bos|>", "<|vision_eos|>",
                "<|vision_start|>", "<|vision_end|>"]
    for s in specials:
        tokens.append(s)
        types.append(3)  # control
    while len(tokens) % 8:
        tokens.append(f"<pad_{len(tokens)}>")
        types.append(4)
    return tokens, types, merges


def rnd(rng, shape, kind, fan_in=1):
    u = rng.uniform(-1.0, 1.0, size=shape)
    if kind == "n":
        return (1.0 + 0.1 * u).astype(np.float32)
    if kind == "b":
        return (0.05 * u).astype(np.float32)
    return (np.sqrt(3.0 / fan_in) * u).astype(np.float32)


def sinusoids(length, channels, max_timescale=10000):
    """Qwen25AudioModel.generate_extra_tensors's table, in numpy."""
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2, dtype=np.float32))
    t = np.arange(length, dtype=np.float32)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def audio_tensors(w, rng):
    d, f, m = A["dim"], A["ffn"], A["mels"]
    # Conv1d weights (out, in, k) as f16, biases unsqueezed to (d, 1)
    w.add_tensor("a.conv1d.1.weight", rnd(rng, (d, m, 3), "w", 3 * m).astype(np.float16))
    w.add_tensor("a.conv1d.1.bias", rnd(rng, (d, 1), "b"))
    w.add_tensor("a.conv1d.2.weight", rnd(rng, (d, d, 3), "w", 3 * d).astype(np.float16))
    w.add_tensor("a.conv1d.2.bias", rnd(rng, (d, 1), "b"))
    w.add_tensor("a.position_embd.weight", sinusoids(A["n_pos"], d))
    for i in range(A["layers"]):
        b = f"a.blk.{i}."
        w.add_tensor(b + "ln1.weight", rnd(rng, (d,), "n"))  # self_attn_layer_norm
        w.add_tensor(b + "ln1.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "attn_q.weight", rnd(rng, (d, d), "w", d))
        w.add_tensor(b + "attn_q.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "attn_k.weight", rnd(rng, (d, d), "w", d))  # k_proj has no bias
        w.add_tensor(b + "attn_v.weight", rnd(rng, (d, d), "w", d))
        w.add_tensor(b + "attn_v.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "attn_out.weight", rnd(rng, (d, d), "w", d))  # out_proj
        w.add_tensor(b + "attn_out.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ln2.weight", rnd(rng, (d,), "n"))  # final_layer_norm
        w.add_tensor(b + "ln2.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (f, d), "w", d))  # fc1
        w.add_tensor(b + "ffn_up.bias", rnd(rng, (f,), "b"))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, f), "w", f))  # fc2
        w.add_tensor(b + "ffn_down.bias", rnd(rng, (d,), "b"))
    w.add_tensor("a.post_ln.weight", rnd(rng, (d,), "n"))  # ln_post
    w.add_tensor("a.post_ln.bias", rnd(rng, (d,), "b"))
    w.add_tensor("mm.a.fc.weight", rnd(rng, (T["dim"], d), "w", d))  # proj
    w.add_tensor("mm.a.fc.bias", rnd(rng, (T["dim"],), "b"))


def vision_block(w, rng, i):
    d, f = V["dim"], V["ffn"]
    b = f"v.blk.{i}."
    for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
        w.add_tensor(b + n + ".weight", rnd(rng, (d, d), "w", d))
        w.add_tensor(b + n + ".bias", rnd(rng, (d,), "b"))
    w.add_tensor(b + "ln1.weight", rnd(rng, (d,), "n"))
    w.add_tensor(b + "ln2.weight", rnd(rng, (d,), "n"))
    for n, shape, fan in (("ffn_gate", (f, d), d), ("ffn_up", (f, d), d), ("ffn_down", (d, f), f)):
        w.add_tensor(b + n + ".weight", rnd(rng, shape, "w", fan))
        w.add_tensor(b + n + ".bias", rnd(rng, (shape[0],), "b"))


def vision_tensors(w, rng):
    """The patch embedding, block 0, post_ln and the merger (blocks 1.. come after the audio half)."""
    d, p = V["dim"], V["patch"]
    w.add_tensor("v.patch_embd.weight", rnd(rng, (d, 3, p, p), "w", 6 * p * p))
    w.add_tensor("v.patch_embd.weight.1", rnd(rng, (d, 3, p, p), "w", 6 * p * p))
    vision_block(w, rng, 0)
    w.add_tensor("v.post_ln.weight", rnd(rng, (d,), "n"))
    w.add_tensor("mm.0.weight", rnd(rng, (4 * d, 4 * d), "w", 4 * d))
    w.add_tensor("mm.0.bias", rnd(rng, (4 * d,), "b"))
    w.add_tensor("mm.2.weight", rnd(rng, (T["dim"], 4 * d), "w", 4 * d))
    w.add_tensor("mm.2.bias", rnd(rng, (T["dim"],), "b"))


def write_mmproj(path, rng):
    w = gguf.GGUFWriter(path, "clip")
    # MmprojModel.set_gguf_parameters (both encoders), then Qwen2VLVisionModel's, Qwen25AudioModel's
    # and Qwen25OmniModel's
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_clip_has_vision_encoder(True)
    w.add_vision_projection_dim(T["dim"])
    w.add_vision_image_size(V["image_size"])
    w.add_vision_patch_size(V["patch"])
    w.add_vision_embedding_length(V["dim"])
    w.add_vision_feed_forward_length(V["ffn"])
    w.add_vision_block_count(V["layers"])
    w.add_vision_head_count(V["heads"])
    w.add_vision_image_mean(CLIP_MEAN)
    w.add_vision_image_std(CLIP_STD)
    w.add_clip_has_audio_encoder(True)
    w.add_audio_projection_dim(T["dim"])
    w.add_audio_embedding_length(A["dim"])
    w.add_audio_feed_forward_length(A["ffn"])
    w.add_audio_block_count(A["layers"])
    w.add_audio_head_count(A["heads"])
    w.add_clip_projector_type(gguf.VisionProjectorType.QWEN25O)
    w.add_vision_use_silu(True)
    w.add_vision_n_wa_pattern(V["n_wa_pattern"])  # fullatt_block_indexes [1]
    w.add_vision_attention_layernorm_eps(V["eps"])
    w.add_audio_num_mel_bins(A["mels"])
    w.add_audio_attention_layernorm_eps(A["eps"])
    vision_tensors(w, rng)
    audio_tensors(w, rng)
    extra = np.random.default_rng(SEED + 2)
    for i in range(1, V["layers"]):
        vision_block(w, extra, i)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_decoder(path, rng):
    tokens, types, merges = vocabulary()
    n_vocab, d, hd = len(tokens), T["dim"], T["dim"] // T["heads"]
    w = gguf.GGUFWriter(path, "qwen2vl")
    w.add_name("kamera tiny Qwen2.5-Omni thinker")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(T["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(T["layers"])
    w.add_feed_forward_length(T["ffn"])
    w.add_head_count(T["heads"])
    w.add_head_count_kv(T["kv_heads"])
    w.add_rope_freq_base(T["theta"])
    w.add_layer_norm_rms_eps(T["eps"])
    w.add_rope_dimension_sections(T["sections"])
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_tensor("token_embd.weight", rnd(rng, (n_vocab, d), "w", 3))
    kv = T["kv_heads"] * hd
    for i in range(T["layers"]):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "attn_q.weight", rnd(rng, (d, d), "w", d))
        w.add_tensor(b + "attn_q.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "attn_k.weight", rnd(rng, (kv, d), "w", d))
        w.add_tensor(b + "attn_k.bias", rnd(rng, (kv,), "b"))
        w.add_tensor(b + "attn_v.weight", rnd(rng, (kv, d), "w", d))
        w.add_tensor(b + "attn_v.bias", rnd(rng, (kv,), "b"))
        w.add_tensor(b + "attn_output.weight", rnd(rng, (d, d), "w", d))
        w.add_tensor(b + "ffn_norm.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "ffn_gate.weight", rnd(rng, (T["ffn"], d), "w", d))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (T["ffn"], d), "w", d))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, T["ffn"]), "w", T["ffn"]))
    w.add_tensor("output_norm.weight", rnd(rng, (d,), "n"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sound(rate, seconds=2.0):
    """A chirp with two harmonics and a slow beat, peak about 0.6."""
    t = np.arange(int(rate * seconds)) / rate
    phase = 2 * np.pi * (300 * t + 400 * t * t)
    x = 0.35 * np.sin(phase) + 0.15 * np.sin(2 * phase) + 0.08 * np.sin(3 * phase + 1.0)
    return x * (0.75 + 0.25 * np.cos(2 * np.pi * 1.5 * t))


def write_wav(path, rate, channels):
    data = np.round(sound(rate) * 32767).astype("<i2").tobytes()
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE")
        f.write(b"fmt " + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * 2 * channels,
                                      2 * channels, 16))
        f.write(b"data" + struct.pack("<I", len(data)) + data)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    write_mmproj(f"{out}/mmproj.gguf", np.random.default_rng(SEED))
    write_decoder(f"{out}/decoder.gguf", np.random.default_rng(SEED + 1))
    write_wav(f"{out}/clip_16k.wav", 16000, 1)


if __name__ == "__main__":
    main()
