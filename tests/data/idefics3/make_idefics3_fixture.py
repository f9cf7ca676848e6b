"""Writes a tiny random SmolVLM2 pair with llama.cpp's gguf-py, in the layout its converter writes:
the tower (conversion/smolvlm.py, SmolVLMModel: clip.projector_type "idefics3") and a SmolLM2-style
llama decoder (tied embeddings, a byte-level BPE vocabulary holding SmolVLM's image tokens).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_idefics3_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf and OUT_DIR/img_144x96.png; the same bytes on every
run (tests/data/idefics3/README.md).
"""
import struct
import sys
import zlib

import numpy as np
import gguf

# The tower: SigLIP of width 32, 2 layers, 4 heads, MLP 48 (fc1 / fc2), 4 x 4 patches of 48 x 48
# tiles (a 12 x 12 position table), pixel shuffle by 3 (16 rows per tile), into the decoder's 64.
V = dict(image_size=48, patch=4, dim=32, layers=2, heads=4, ffn=48, scale=3, eps=1e-6,
         longest_edge=144)
# The decoder: llama of width 64, 2 layers, 4 heads of which 2 KV heads, MLP 96, tied output.
T = dict(dim=64, layers=2, heads=4, kv_heads=2, ffn=96, ctx=512, eps=1e-5, theta=100000.0)
SEED = 1


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
    """256 byte tokens, a few merges (among them "\\n\\n"), then SmolVLM's added tokens."""
    u = byte_units()
    tokens = [u[b] for b in range(256)]
    types = [1] * 256
    merges = []
    for a, b in [("Ċ", "Ċ"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]:
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(1)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<fake_token_around_image>",
                "<image>", "<global-img>", "<end_of_utterance>"]
    specials += [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
    for s in specials:
        tokens.append(s)
        types.append(3 if s.startswith("<|") else 4)  # control / user-defined, as SmolVLM2's
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
    """A smooth synthetic pattern with some texture (no resize artefacts matter at these sizes)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / 7.0) * np.cos(y / 11.0)
    g = 255 * (x + y) / (w + h)
    b = 128 + 120 * np.sin((x - 2 * y) / 5.0)
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
    d, f, p, s = V["dim"], V["ffn"], V["patch"], V["scale"]
    side = V["image_size"] // p
    w = gguf.GGUFWriter(path, "clip")
    # MmprojModel.set_gguf_parameters, then SmolVLMModel's
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
    w.add_clip_projector_type(gguf.VisionProjectorType.IDEFICS3)
    w.add_vision_attention_layernorm_eps(V["eps"])
    w.add_vision_projector_scale_factor(s)
    w.add_vision_use_gelu(True)
    w.add_vision_preproc_image_size(V["longest_edge"])
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
    # connector.modality_projection.proj: Linear(dim * scale^2, text width, bias=False)
    w.add_tensor("mm.model.fc.weight", rnd(rng, (T["dim"], d * s * s), "w", d * s * s))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_decoder(path, rng):
    tokens, types, merges = vocabulary()
    n_vocab, d, hd = len(tokens), T["dim"], T["dim"] // T["heads"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("kamera tiny SmolVLM2 decoder")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(T["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(T["layers"])
    w.add_feed_forward_length(T["ffn"])
    w.add_head_count(T["heads"])
    w.add_head_count_kv(T["kv_heads"])
    w.add_rope_freq_base(T["theta"])
    w.add_layer_norm_rms_eps(T["eps"])
    w.add_rope_dimension_count(hd)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|im_start|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_unk_token_id(tokens.index("<|endoftext|>"))
    w.add_pad_token_id(tokens.index("<|im_end|>"))
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
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    write_mmproj(f"{out}/mmproj.gguf", np.random.default_rng(SEED))
    write_decoder(f"{out}/decoder.gguf", np.random.default_rng(SEED + 1))
    write_png(f"{out}/img_144x96.png", image(144, 96))


if __name__ == "__main__":
    main()
