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
import os
import sys

import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fixture_gguf import byte_units, rnd, write_png  # noqa: E402,F401 (importable from here)
import fixture_gguf as fg  # noqa: E402

# The tower: a CLIP ViT of width 32, 3 layers in the checkpoint, 4 heads, MLP 48, quick-GELU, 4 x 4
# patches of a 32 x 32 picture (8 x 8 patches and the class token: a 65-entry position table).
# LLaVA-1.5 reads the penultimate hidden state (mm_vision_select_layer = -2): the converter keeps
# the first 2 layers and writes clip.vision.feature_layer = [2]. The projector 32 -> 64 -> GELU
# -> 64 (mm_projector_type "mlp2x_gelu").
V = dict(image_size=32, patch=4, dim=32, layers=3, select_layer=-2, heads=4, ffn=48, eps=1e-5)
# The decoder: llama of width 64, 2 layers, 4 heads of which 2 KV heads, MLP 96, its own output.
T = dict(dim=64, layers=2, heads=4, kv_heads=2, ffn=96, ctx=512, eps=1e-5, theta=10000.0)
SEED = 11
CLIP_MEAN, CLIP_STD = fg.CLIP_MEAN, fg.CLIP_STD


def vocabulary():
    """256 byte tokens, a few merges, then a few control tokens."""
    return fg.bpe_vocabulary(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])


def image(w, h):
    """A smooth drawn pattern with some texture."""
    return fg.pattern(w, h, wave=(3.0, 5.0), ramp=(2, 1), stripe=(1, 3, 4.0))


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
    fg.linear(w, rng, "mm.0", T["dim"], d)
    fg.linear(w, rng, "mm.2", T["dim"], T["dim"])
    w.add_tensor("v.class_embd", rnd(rng, (d,), "p"))
    w.add_tensor("v.patch_embd.weight", rnd(rng, (d, 3, p, p), "w", 3 * p * p))  # no bias
    w.add_tensor("v.position_embd.weight", rnd(rng, (1 + side * side, d), "p"))
    w.add_tensor("v.pre_ln.weight", rnd(rng, (d,), "n"))
    w.add_tensor("v.pre_ln.bias", rnd(rng, (d,), "b"))
    for layer in layers[:feature_layer]:
        for name, t in layer:
            w.add_tensor(name, t)
    fg.finish(w)


def write_decoder(path, rng):
    fg.write_bpe_decoder(path, rng, "llama", "kamera tiny LLaVA decoder", T, vocabulary(),
                         fg.QWEN2_TOKENS,
                         lambda w: w.add_rope_dimension_count(T["dim"] // T["heads"]), output=True)


def main():
    fg.run(SEED, write_mmproj, write_decoder, [
        ("img_32.png", lambda p: write_png(p, image(32, 32)))])


if __name__ == "__main__":
    main()
