"""Writes a tiny random InternVL pair with llama.cpp's gguf-py, in the layout its converter writes:
the tower (conversion/internvl.py, InternVisionModel: clip.projector_type "internvl", the fused
qkv split into q / k / v, the layer scales ls1 / ls2, the class token and the (1, 1 + n, dim)
position table as the checkpoint holds them, mlp1 as mm.model.mlp.{0,1,3}) and a qwen2 decoder
(tied embeddings, q / k / v biases, a byte-level BPE vocabulary holding InternVL's image tokens).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_internvl_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf, OUT_DIR/img_32.png and OUT_DIR/img_64.png; the same bytes on every
run (tests/data/internvl/README.md).
"""
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fixture_gguf import byte_units, rnd, write_png  # noqa: E402,F401 (importable from here)
import fixture_gguf as fg  # noqa: E402

# The tower: InternViT of width 32, 2 layers, 4 heads, MLP 48 (fc1 / fc2), 4 x 4 patches of a
# 32 x 32 picture (8 x 8 patches and the class token: a 65-entry position table), pixel shuffle
# by 2 (downsample_ratio 0.5: 16 rows), the projector LayerNorm(128) -> 64 -> GELU -> 64.
V = dict(image_size=32, patch=4, dim=32, layers=2, heads=4, ffn=48, scale=2, eps=1e-6,
         min_tiles=1, max_tiles=12)
# The decoder: qwen2 of width 64, 2 layers, 4 heads of which 2 KV heads, MLP 96, tied output.
T = dict(dim=64, layers=2, heads=4, kv_heads=2, ffn=96, ctx=512, eps=1e-6, theta=1000000.0)
SEED = 5
IMAGENET_MEAN, IMAGENET_STD = fg.IMAGENET_MEAN, fg.IMAGENET_STD


def vocabulary():
    """256 byte tokens, a few merges, then Qwen2's chat tokens and InternVL's image tokens."""
    return fg.bpe_vocabulary(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>",
                              "<IMG_CONTEXT>"])


def image(w, h):
    """A smooth drawn pattern with some texture."""
    return fg.pattern(w, h, wave=(3.0, 5.0), ramp=(2, 1), stripe=(1, 3, 4.0))


def write_mmproj(path, rng):
    d, f, p, s = V["dim"], V["ffn"], V["patch"], V["scale"]
    side = V["image_size"] // p
    w = fg.mmproj_writer(path)
    # MmprojModel.set_gguf_parameters, then InternVisionModel's
    fg.vision_keys(w, T["dim"], V, IMAGENET_MEAN, IMAGENET_STD)
    # the scale factor: int(1 / downsample_ratio)
    fg.add_keys(w, clip_projector_type=gguf.VisionProjectorType.INTERNVL,
                vision_attention_layernorm_eps=V["eps"], vision_use_gelu=True,
                vision_projector_scale_factor=s, vision_preproc_min_tiles=V["min_tiles"],
                vision_preproc_max_tiles=V["max_tiles"])
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
        fg.linear(w, rng, b + "attn_out", d, d)  # attn.proj
        fg.layernorm(w, rng, b + "ln1", d)  # norm1
        fg.layernorm(w, rng, b + "ln2", d)  # norm2
        fg.linear(w, rng, b + "ffn_up", f, d)  # mlp.fc1
        fg.linear(w, rng, b + "ffn_down", d, f)  # mlp.fc2
        w.add_tensor(b + "ls1.weight", rnd(rng, (d,), "ls"))
        w.add_tensor(b + "ls2.weight", rnd(rng, (d,), "ls"))
    # mlp1: LayerNorm(d * s^2), Linear(d * s^2, text), GELU, Linear(text, text)
    ds = d * s * s
    fg.layernorm(w, rng, "mm.model.mlp.0", ds)
    fg.linear(w, rng, "mm.model.mlp.1", T["dim"], ds)
    fg.linear(w, rng, "mm.model.mlp.3", T["dim"], T["dim"])
    fg.finish(w)


def write_decoder(path, rng):
    fg.write_bpe_decoder(path, rng, "qwen2", "kamera tiny InternVL decoder", T, vocabulary(),
                         fg.QWEN2_TOKENS, qkv_bias=True)


def main():
    fg.run(SEED, write_mmproj, write_decoder, [
        ("img_32.png", lambda p: write_png(p, image(32, 32))),
        ("img_64.png", lambda p: write_png(p, image(64, 64)))])


if __name__ == "__main__":
    main()
