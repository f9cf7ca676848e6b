"""Writes a tiny random Gemma 3 pair with llama.cpp's gguf-py, in the layout its converter writes:
the tower (conversion/gemma.py, Gemma3VisionModel: clip.projector_type "gemma3", the input
projection forced to f16) and a gemma3 decoder (Gemma3Model: norms stored as 1 + w, a
SentencePiece vocabulary holding Gemma 3's image tokens).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_gemma3_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf and OUT_DIR/img_64.png; the same bytes on every
run (tests/data/gemma3/README.md).
"""
import struct
import sys
import zlib

import numpy as np
import gguf

# The tower: SigLIP of width 32, 2 layers, 4 heads, MLP 48, 4 x 4 patches of a 64 x 64 picture
# (a 16 x 16 position table), average pooling 4 x 4 (16 rows, the converter's default factor:
# no scale_factor key), RMS norm, projection into the decoder's 64.
V = dict(image_size=64, patch=4, dim=32, layers=2, heads=4, ffn=48, eps=1e-6)
# The decoder: gemma3 of width 64, 2 layers, 4 heads of 16 on 2 KV heads, MLP 96; written as the
# converter writes a config with sliding_window_pattern 1 (no sliding_window key: every layer
# global in llama.cpp and kamera).
T = dict(dim=64, layers=2, heads=4, kv_heads=2, head=16, ffn=96, ctx=512, eps=1e-6)
SEED = 3


def vocabulary():
    """Gemma's specials, its image tokens, 256 byte pieces and a few words (SentencePiece)."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
              "<start_of_image>", "<end_of_image>", "<image_soft_token>"]
    types = [3, 3, 3, 2, 4, 4, 4, 4, 4]  # control, unknown, user-defined (as Gemma 3's file)
    scores = [0.0] * len(tokens)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(6)
        scores.append(0.0)
    words = ["\n", "\u2581"] + list("abcdefghijklmnopqrstuvwxyz") + [
        "us", "er", "user", "mo", "de", "del", "model", "wh", "at", "what", "\u2581the", "is"]
    for i, w in enumerate(words):
        tokens.append(w)
        types.append(1)
        scores.append(-1000.0 + (len(w) * 10 + i * 0.01 if len(w) > 1 else -i))
    while len(tokens) % 8:
        tokens.append(f"<unused{len(tokens)}>")
        types.append(5)
        scores.append(-1e9)
    return tokens, types, scores


def write_png(path, rgb):
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(tag, data):
        c = struct.pack(">I", len(data)) + tag + data
        return c + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))


def image(w, h):
    """A smooth drawn pattern with some texture."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / 5.0) * np.cos(y / 9.0)
    g = 255 * (x + 2 * y) / (w + 2 * h)
    b = 128 + 120 * np.sin((2 * x - y) / 6.0)
    return np.clip(np.stack([r, g, b], -1).round(), 0, 255).astype(np.uint8)


def rnd(rng, shape, kind, fan_in=1):
    u = rng.uniform(-1.0, 1.0, size=shape)
    if kind == "n":
        return (1.0 + 0.1 * u).astype(np.float32)
    if kind == "b":
        return (0.05 * u).astype(np.float32)
    if kind == "p":
        return (0.5 * u).astype(np.float32)
    return (np.sqrt(3.0 / fan_in) * u).astype(np.float32)


def write_mmproj(path, rng):
    d, f, p = V["dim"], V["ffn"], V["patch"]
    side = V["image_size"] // p
    w = gguf.GGUFWriter(path, "clip")
    # MmprojModel.set_gguf_parameters, then Gemma3VisionModel's (scale factor 16 / 4 = 4: no key)
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_clip_has_vision_encoder(True)
    w.add_vision_projection_dim(T["dim"])
    w.add_vision_image_size(V["image_size"])
    w.add_vision_patch_size(p)
    w.add_vision_embedding_length(d)
    w.add_vision_feed_forward_length(f)
    w.add_vision_block_count(V["layers"])
    w.add_vision_head_count(V["heads"])
    w.add_vision_image_mean([0.5, 0.5, 0.5])
    w.add_vision_image_std([0.5, 0.5, 0.5])
    w.add_clip_projector_type(gguf.VisionProjectorType.GEMMA3)
    w.add_vision_attention_layernorm_eps(V["eps"])
    w.add_vision_use_gelu(True)
    # tensors as torch holds them (out, in), written in numpy order (GGUF's ne reversed)
    w.add_tensor("v.patch_embd.weight", rnd(rng, (d, 3, p, p), "w", 3 * p * p))
    w.add_tensor("v.patch_embd.bias", rnd(rng, (d,), "b"))
    w.add_tensor("v.position_embd.weight", rnd(rng, (side * side, d), "p"))
    for i in range(V["layers"]):
        b = f"v.blk.{i}."
        for n in ("attn_q", "attn_k", "attn_v"):
            w.add_tensor(b + n + ".weight", rnd(rng, (d, d), "w", d))
            w.add_tensor(b + n + ".bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ln1.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "ln1.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "attn_out.weight", rnd(rng, (d, d), "w", d))
        w.add_tensor(b + "attn_out.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ln2.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "ln2.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (f, d), "w", d))  # mlp.fc1
        w.add_tensor(b + "ffn_up.bias", rnd(rng, (f,), "b"))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, f), "w", f))  # mlp.fc2
        w.add_tensor(b + "ffn_down.bias", rnd(rng, (d,), "b"))
    w.add_tensor("v.post_ln.weight", rnd(rng, (d,), "n"))
    w.add_tensor("v.post_ln.bias", rnd(rng, (d,), "b"))
    # multi_modal_projector: mm_soft_emb_norm (Gemma3RMSNorm, stored as 1 + w) and
    # mm_input_projection_weight, a (vision width, text width) parameter the converter writes as f16
    w.add_tensor("mm.soft_emb_norm.weight", rnd(rng, (d,), "n"))
    proj = rnd(rng, (d, T["dim"]), "w", d).astype(np.float16)
    w.add_tensor("mm.input_projection.weight", proj, raw_dtype=gguf.GGMLQuantizationType.F16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_decoder(path, rng):
    tokens, types, scores = vocabulary()
    n_vocab, d, hd = len(tokens), T["dim"], T["head"]
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_name("kamera tiny Gemma 3 decoder")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(T["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(T["layers"])
    w.add_feed_forward_length(T["ffn"])
    w.add_head_count(T["heads"])
    w.add_head_count_kv(T["kv_heads"])
    w.add_layer_norm_rms_eps(T["eps"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(1000000.0)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
    w.add_tensor("token_embd.weight", rnd(rng, (n_vocab, d), "w", 3 * d))
    q, kv = T["heads"] * hd, T["kv_heads"] * hd
    for i in range(T["layers"]):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "attn_q.weight", rnd(rng, (q, d), "w", d))
        w.add_tensor(b + "attn_k.weight", rnd(rng, (kv, d), "w", d))
        w.add_tensor(b + "attn_v.weight", rnd(rng, (kv, d), "w", d))
        w.add_tensor(b + "attn_q_norm.weight", rnd(rng, (hd,), "n"))
        w.add_tensor(b + "attn_k_norm.weight", rnd(rng, (hd,), "n"))
        w.add_tensor(b + "attn_output.weight", rnd(rng, (d, q), "w", q))
        w.add_tensor(b + "post_attention_norm.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "ffn_norm.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "ffn_gate.weight", rnd(rng, (T["ffn"], d), "w", d))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (T["ffn"], d), "w", d))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, T["ffn"]), "w", T["ffn"]))
        w.add_tensor(b + "post_ffw_norm.weight", rnd(rng, (d,), "n"))
    w.add_tensor("output_norm.weight", rnd(rng, (d,), "n"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    write_mmproj(f"{out}/mmproj.gguf", np.random.default_rng(SEED))
    write_decoder(f"{out}/decoder.gguf", np.random.default_rng(SEED + 1))
    write_png(f"{out}/img_64.png", image(64, 64))


if __name__ == "__main__":
    main()
