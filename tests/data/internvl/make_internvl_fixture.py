"""Writes a tiny random InternVL pair with llama.cpp's gguf-py, in the layout its converter writes:
the tower (conversion/internvl.py, InternVisionModel: clip.projector_type "internvl", the fused
qkv split into q / k / v, the layer scales ls1 / ls2, the class token and the (1, 1 + n, dim)
position table as the checkpoint holds them, mlp1 as mm.model.mlp.{0,1,3}) and a qwen2 decoder
(tied embeddings, q / k / v biases, a byte-level BPE vocabulary holding InternVL's image tokens).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_internvl_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf, OUT_DIR/img_32.png and OUT_DIR/img_64.png; the same bytes on every
run (tests/data/internvl/README.md).
"""
import struct
import sys
import zlib

import numpy as np
import gguf

# The tower: InternViT of width 32, 2 layers, 4 heads, MLP 48 (fc1 / fc2), 4 x 4 patches of a
# 32 x 32 picture (8 x 8 patches and the class token: a 65-entry position table), pixel shuffle
# by 2 (downsample_ratio 0.5: 16 rows), the projector LayerNorm(128) -> 64 -> GELU -> 64.
V = dict(image_size=32, patch=4, dim=32, layers=2, heads=4, ffn=48, scale=2, eps=1e-6,
         min_tiles=1, max_tiles=12)
# The decoder: qwen2 of width 64, 2 layers, 4 heads of which 2 KV heads, MLP 96, tied output.
T = dict(dim=64, layers=2, heads=4, kv_heads=2, ffn=96, ctx=512, eps=1e-6, theta=1000000.0)
SEED = 5
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


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
    """256 byte tokens, a few merges, then Qwen2's chat tokens and InternVL's image tokens."""
    u = byte_units()
    tokens = [u[b] for b in range(256)]
    types = [1] * 256
    merges = []
    for a, b in [("Ċ", "Ċ"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]:
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(1)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>",
                "<IMG_CONTEXT>"]
    for s in specials:
        tokens.append(s)
        types.append(3 if s.startswith("<|") else 4)  # control / user-defined
    while len(tokens) % 8:
        tokens.append(f"<pad_{len(tokens)}>")
        types.append(4)
    return tokens, types, merges


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
    r = 128 + 100 * np.sin(x / 3.0) * np.cos(y / 5.0)
    g = 255 * (2 * x + y) / (2 * w + h)
    b = 128 + 120 * np.sin((x - 3 * y) / 4.0)
    return np.clip(np.stack([r, g, b], -1).round(), 0, 255).astype(np.uint8)


def rnd(rng, shape, kind, fan_in=1):
    u = rng.uniform(-1.0, 1.0, size=shape)
    if kind == "n":
        return (1.0 + 0.1 * u).astype(np.float32)
    if kind == "b":
        return (0.05 * u).astype(np.float32)
    if kind == "p":
        return (0.5 * u).astype(np.float32)
    if kind == "ls":  # layer scales: InternViT initialises them at 0.1
        return (0.1 + 0.05 * u).astype(np.float32)
    return (np.sqrt(3.0 / fan_in) * u).astype(np.float32)


def write_mmproj(path, rng):
    d, f, p, s = V["dim"], V["ffn"], V["patch"], V["scale"]
    side = V["image_size"] // p
    w = gguf.GGUFWriter(path, "clip")
    # MmprojModel.set_gguf_parameters, then InternVisionModel's
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
    w.add_vision_image_mean(IMAGENET_MEAN)
    w.add_vision_image_std(IMAGENET_STD)
    w.add_clip_projector_type(gguf.VisionProjectorType.INTERNVL)
    w.add_vision_attention_layernorm_eps(V["eps"])
    w.add_vision_use_gelu(True)
    w.add_vision_projector_scale_factor(s)  # int(1 / downsample_ratio)
    w.add_vision_preproc_min_tiles(V["min_tiles"])
    w.add_vision_preproc_max_tiles(V["max_tiles"])
    # tensors as torch holds them, written in numpy order (GGUF's ne reversed)
    w.add_tensor("v.class_embd", rnd(rng, (1, 1, d), "p"))
    w.add_tensor("v.patch_embd.weight", rnd(rng, (d, 3, p, p), "w", 3 * p * p))
    w.add_tensor("v.patch_embd.bias", rnd(rng, (d,), "b"))
    w.add_tensor("v.position_embd.weight", rnd(rng, (1, 1 + side * side, d), "p"))
    for i in range(V["layers"]):
        b = f"v.blk.{i}."
        # attn.qkv (3d, d) split into q, k, v by the converter
        qkv_w, qkv_b = rnd(rng, (3 * d, d), "w", d), rnd(rng, (3 * d,), "b")
        for j, n in enumerate(("attn_q", "attn_k", "attn_v")):
            w.add_tensor(b + n + ".weight", np.ascontiguousarray(qkv_w[j * d:(j + 1) * d]))
            w.add_tensor(b + n + ".bias", np.ascontiguousarray(qkv_b[j * d:(j + 1) * d]))
        w.add_tensor(b + "attn_out.weight", rnd(rng, (d, d), "w", d))  # attn.proj
        w.add_tensor(b + "attn_out.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ln1.weight", rnd(rng, (d,), "n"))  # norm1
        w.add_tensor(b + "ln1.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ln2.weight", rnd(rng, (d,), "n"))  # norm2
        w.add_tensor(b + "ln2.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (f, d), "w", d))  # mlp.fc1
        w.add_tensor(b + "ffn_up.bias", rnd(rng, (f,), "b"))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, f), "w", f))  # mlp.fc2
        w.add_tensor(b + "ffn_down.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ls1.weight", rnd(rng, (d,), "ls"))
        w.add_tensor(b + "ls2.weight", rnd(rng, (d,), "ls"))
    # mlp1: LayerNorm(d * s^2), Linear(d * s^2, text), GELU, Linear(text, text)
    ds = d * s * s
    w.add_tensor("mm.model.mlp.0.weight", rnd(rng, (ds,), "n"))
    w.add_tensor("mm.model.mlp.0.bias", rnd(rng, (ds,), "b"))
    w.add_tensor("mm.model.mlp.1.weight", rnd(rng, (T["dim"], ds), "w", ds))
    w.add_tensor("mm.model.mlp.1.bias", rnd(rng, (T["dim"],), "b"))
    w.add_tensor("mm.model.mlp.3.weight", rnd(rng, (T["dim"], T["dim"]), "w", T["dim"]))
    w.add_tensor("mm.model.mlp.3.bias", rnd(rng, (T["dim"],), "b"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_decoder(path, rng):
    tokens, types, merges = vocabulary()
    n_vocab, d, hd = len(tokens), T["dim"], T["dim"] // T["heads"]
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_name("kamera tiny InternVL decoder")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(T["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(T["layers"])
    w.add_feed_forward_length(T["ffn"])
    w.add_head_count(T["heads"])
    w.add_head_count_kv(T["kv_heads"])
    w.add_rope_freq_base(T["theta"])
    w.add_layer_norm_rms_eps(T["eps"])
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


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    write_mmproj(f"{out}/mmproj.gguf", np.random.default_rng(SEED))
    write_decoder(f"{out}/decoder.gguf", np.random.default_rng(SEED + 1))
    write_png(f"{out}/img_32.png", image(32, 32))
    write_png(f"{out}/img_64.png", image(64, 64))


if __name__ == "__main__":
    main()
