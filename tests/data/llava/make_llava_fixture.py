"""Writes a tiny random LLaVA-1.5 pair with llama.cpp's gguf-py, in the layout its legacy converter
(tools/mtmd/legacy-models/convert_image_encoder_to_gguf.py --llava-projector, --use-f32) writes:
the tower (clip.projector_type "mlp", clip.has_llava_projector, the CLIP ViT's layers up to the
feature layer, its pre-layernorm "v.pre_ln", no post-layernorm, mlp.fc1 / fc2 named ffn_down /
ffn_up as that script names them, the class token, the projector as mm.0 / mm.2) and a llama
decoder (a byte-level BPE vocabulary).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_llava_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf and OUT_DIR/img_32.png; the same bytes on every
run (tests/data/llava/README.md).
"""
import struct
import sys
import zlib

import numpy as np
import gguf

# The tower: a CLIP ViT of width 32, 3 layers in the checkpoint, 4 heads, MLP 48, quick-GELU, 4 x 4
# patches of a 32 x 32 picture (8 x 8 patches and the class token: a 65-entry position table).
# LLaVA-1.5 reads the penultimate hidden state (mm_vision_select_layer = -2): the converter keeps
# the first 2 layers and writes clip.vision.feature_layer = [2]. The projector 32 -> 64 -> GELU
# -> 64 (mm_projector_type "mlp2x_gelu").
V = dict(image_size=32, patch=4, dim=32, layers=3, select_layer=-2, heads=4, ffn=48, eps=1e-5)
# The decoder: llama of width 64, 2 layers, 4 heads of which 2 KV heads, MLP 96, its own output.
T = dict(dim=64, layers=2, heads=4, kv_heads=2, ffn=96, ctx=512, eps=1e-5, theta=10000.0)
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
    """256 byte tokens, a few merges, then a few control tokens."""
    u = byte_units()
    tokens = [u[b] for b in range(256)]
    types = [1] * 256
    merges = []
    for a, b in [("Ċ", "Ċ"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]:
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(1)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
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
    d, f, p = V["dim"], V["ffn"], V["patch"]
    side = V["image_size"] // p
    # to_non_negative(mm_vision_select_layer): hidden state index; the layers before it are kept
    feature_layer = V["layers"] + V["select_layer"] + 1
    w = gguf.GGUFWriter(path, "clip")
    w.add_bool("clip.has_text_encoder", False)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_llava_projector", True)
    w.add_file_type(0)  # --use-f32
    w.add_name("kamera tiny LLaVA-1.5 tower")
    w.add_description("image encoder for LLaVA")
    w.add_string("clip.projector_type", "mlp")
    w.add_uint32("clip.vision.image_size", V["image_size"])
    w.add_uint32("clip.vision.patch_size", p)
    w.add_uint32("clip.vision.embedding_length", d)
    w.add_uint32("clip.vision.feed_forward_length", f)
    w.add_uint32("clip.vision.projection_dim", T["dim"])
    w.add_uint32("clip.vision.attention.head_count", V["heads"])
    w.add_float32("clip.vision.attention.layer_norm_epsilon", V["eps"])
    w.add_uint32("clip.vision.block_count", feature_layer)
    w.add_array("clip.vision.feature_layer", [feature_layer])
    w.add_array("clip.vision.image_mean", CLIP_MEAN)
    w.add_array("clip.vision.image_std", CLIP_STD)
    w.add_bool("clip.use_gelu", False)  # hidden_act "quick_gelu"
    # the checkpoint's tensors (torch shapes), all drawn; the converter drops the layers past
    # the feature layer and the post-layernorm
    layers = []
    for i in range(V["layers"]):
        layers.append([(f"v.blk.{i}." + n, rnd(rng, shape, kind, fan)) for n, shape, kind, fan in [
            ("attn_q.weight", (d, d), "w", d), ("attn_q.bias", (d,), "b", 1),
            ("attn_k.weight", (d, d), "w", d), ("attn_k.bias", (d,), "b", 1),
            ("attn_v.weight", (d, d), "w", d), ("attn_v.bias", (d,), "b", 1),
            ("attn_out.weight", (d, d), "w", d), ("attn_out.bias", (d,), "b", 1),
            ("ln1.weight", (d,), "n", 1), ("ln1.bias", (d,), "b", 1),
            ("ffn_down.weight", (f, d), "w", d), ("ffn_down.bias", (f,), "b", 1),  # mlp.fc1
            ("ffn_up.weight", (d, f), "w", f), ("ffn_up.bias", (d,), "b", 1),  # mlp.fc2
            ("ln2.weight", (d,), "n", 1), ("ln2.bias", (d,), "b", 1)]])
    w.add_tensor("mm.0.weight", rnd(rng, (T["dim"], d), "w", d))
    w.add_tensor("mm.0.bias", rnd(rng, (T["dim"],), "b"))
    w.add_tensor("mm.2.weight", rnd(rng, (T["dim"], T["dim"]), "w", T["dim"]))
    w.add_tensor("mm.2.bias", rnd(rng, (T["dim"],), "b"))
    w.add_tensor("v.class_embd", rnd(rng, (d,), "p"))
    w.add_tensor("v.patch_embd.weight", rnd(rng, (d, 3, p, p), "w", 3 * p * p))  # no bias
    w.add_tensor("v.position_embd.weight", rnd(rng, (1 + side * side, d), "p"))
    w.add_tensor("v.pre_ln.weight", rnd(rng, (d,), "n"))
    w.add_tensor("v.pre_ln.bias", rnd(rng, (d,), "b"))
    for layer in layers[:feature_layer]:
        for name, t in layer:
            w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_decoder(path, rng):
    tokens, types, merges = vocabulary()
    n_vocab, d, hd = len(tokens), T["dim"], T["dim"] // T["heads"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("kamera tiny LLaVA decoder")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(T["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(T["layers"])
    w.add_feed_forward_length(T["ffn"])
    w.add_head_count(T["heads"])
    w.add_head_count_kv(T["kv_heads"])
    w.add_rope_freq_base(T["theta"])
    w.add_layer_norm_rms_eps(T["eps"])
    w.add_rope_dimension_count(d // T["heads"])
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
        w.add_tensor(b + "attn_k.weight", rnd(rng, (kv, d), "w", d))
        w.add_tensor(b + "attn_v.weight", rnd(rng, (kv, d), "w", d))
        w.add_tensor(b + "attn_output.weight", rnd(rng, (d, d), "w", d))
        w.add_tensor(b + "ffn_norm.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "ffn_gate.weight", rnd(rng, (T["ffn"], d), "w", d))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (T["ffn"], d), "w", d))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, T["ffn"]), "w", T["ffn"]))
    w.add_tensor("output_norm.weight", rnd(rng, (d,), "n"))
    w.add_tensor("output.weight", rnd(rng, (n_vocab, d), "w", d))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    write_mmproj(f"{out}/mmproj.gguf", np.random.default_rng(SEED))
    write_decoder(f"{out}/decoder.gguf", np.random.default_rng(SEED + 1))
    write_png(f"{out}/img_32.png", image(32, 32))


if __name__ == "__main__":
    main()
