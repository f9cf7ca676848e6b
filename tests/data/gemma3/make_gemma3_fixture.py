"""Writes a tiny random Gemma 3 pair with llama.cpp's gguf-py, in the layout its converter writes:
the tower (conversion/gemma.py, Gemma3VisionModel: clip.projector_type "gemma3", the input
projection forced to f16) and a gemma3 decoder (Gemma3Model: norms stored as 1 + w, a
SentencePiece vocabulary holding Gemma 3's image tokens).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_gemma3_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf and OUT_DIR/img_64.png; the same bytes on every
run (tests/data/gemma3/README.md).
"""
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fixture_gguf import rnd, write_png  # noqa: E402,F401 (importable from here)
import fixture_gguf as fg  # noqa: E402

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


def image(w, h):
    """A smooth drawn pattern with some texture."""
    return fg.pattern(w, h, wave=(5.0, 9.0), ramp=(1, 2), stripe=(2, 1, 6.0))


def write_mmproj(path, rng):
    d = V["dim"]
    w = fg.mmproj_writer(path)
    # MmprojModel.set_gguf_parameters, then Gemma3VisionModel's (scale factor 16 / 4 = 4: no key)
    fg.vision_keys(w, T["dim"], V, [0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
    fg.add_keys(w, clip_projector_type=gguf.VisionProjectorType.GEMMA3,
                vision_attention_layernorm_eps=V["eps"], vision_use_gelu=True)
    fg.siglip_tower(w, rng, V)
    # multi_modal_projector: mm_soft_emb_norm (Gemma3RMSNorm, stored as 1 + w) and
    # mm_input_projection_weight, a (vision width, text width) parameter the converter writes as f16
    w.add_tensor("mm.soft_emb_norm.weight", rnd(rng, (d,), "n"))
    proj = rnd(rng, (d, T["dim"]), "w", d).astype(np.float16)
    w.add_tensor("mm.input_projection.weight", proj, raw_dtype=gguf.GGMLQuantizationType.F16)
    fg.finish(w)


def write_decoder(path, rng):
    tokens, types, scores = vocabulary()
    n_vocab, d, hd = len(tokens), T["dim"], T["head"]
    w = gguf.GGUFWriter(path, "gemma3")
    fg.add_keys(w, name="kamera tiny Gemma 3 decoder", file_type=gguf.LlamaFileType.ALL_F32,
                context_length=T["ctx"], embedding_length=d, block_count=T["layers"],
                feed_forward_length=T["ffn"], head_count=T["heads"], head_count_kv=T["kv_heads"],
                layer_norm_rms_eps=T["eps"], key_length=hd, value_length=hd,
                rope_freq_base=1000000.0, vocab_size=n_vocab)
    # a SentencePiece vocabulary: bos <bos>, eos <eos>, unk <unk>, pad <pad>
    fg.add_keys(w, tokenizer_model="llama", token_list=tokens, token_scores=scores,
                token_types=types, bos_token_id=2, eos_token_id=1, unk_token_id=3, pad_token_id=0,
                add_bos_token=True, add_eos_token=False, add_space_prefix=False)
    fg.decoder_tensors(w, rng, n_vocab, T, hd, qk_norm=True, post_norms=True, embd_fan=3 * d)
    fg.finish(w)


def main():
    fg.run(SEED, write_mmproj, write_decoder, [
        ("img_64.png", lambda p: write_png(p, image(64, 64)))])


if __name__ == "__main__":
    main()
