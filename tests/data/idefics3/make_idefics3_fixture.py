"""Writes a tiny random SmolVLM2 pair with llama.cpp's gguf-py, in the layout its converter writes:
the tower (conversion/smolvlm.py, SmolVLMModel: clip.projector_type "idefics3") and a SmolLM2-style
llama decoder (tied embeddings, a byte-level BPE vocabulary holding SmolVLM's image tokens).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_idefics3_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf and OUT_DIR/img_144x96.png; the same bytes on every
run (tests/data/idefics3/README.md).
"""
import os
import sys

import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fixture_gguf import byte_units, rnd, write_png  # noqa: E402,F401 (importable from here)
import fixture_gguf as fg  # noqa: E402

# The tower: SigLIP of width 32, 2 layers, 4 heads, MLP 48 (fc1 / fc2), 4 x 4 patches of 48 x 48
# tiles (a 12 x 12 position table), pixel shuffle by 3 (16 rows per tile), into the decoder's 64.
V = dict(image_size=48, patch=4, dim=32, layers=2, heads=4, ffn=48, scale=3, eps=1e-6,
         longest_edge=144)
# The decoder: llama of width 64, 2 layers, 4 heads of which 2 KV heads, MLP 96, tied output.
T = dict(dim=64, layers=2, heads=4, kv_heads=2, ffn=96, ctx=512, eps=1e-5, theta=100000.0)
SEED = 1


def vocabulary():
    """256 byte tokens, a few merges (among them "\\n\\n"), then SmolVLM's added tokens
    (control / user-defined, as SmolVLM2's)."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<fake_token_around_image>",
                "<image>", "<global-img>", "<end_of_utterance>"]
    specials += [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
    return fg.bpe_vocabulary(specials)


def image(w, h):
    """A smooth synthetic pattern with some texture (no resize artefacts matter at these sizes)."""
    return fg.pattern(w, h, wave=(7.0, 11.0), ramp=(1, 1), stripe=(1, 2, 5.0))


def write_mmproj(path, rng):
    d, s = V["dim"], V["scale"]
    w = fg.mmproj_writer(path)
    # MmprojModel.set_gguf_parameters, then SmolVLMModel's
    fg.vision_keys(w, T["dim"], V, [0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
    fg.add_keys(w, clip_projector_type=gguf.VisionProjectorType.IDEFICS3,
                vision_attention_layernorm_eps=V["eps"], vision_projector_scale_factor=s,
                vision_use_gelu=True, vision_preproc_image_size=V["longest_edge"])
    fg.siglip_tower(w, rng, V)
    # connector.modality_projection.proj: Linear(dim * scale^2, text width, bias=False)
    w.add_tensor("mm.model.fc.weight", rnd(rng, (T["dim"], d * s * s), "w", d * s * s))
    fg.finish(w)


def write_decoder(path, rng):
    hd = T["dim"] // T["heads"]
    fg.write_bpe_decoder(path, rng, "llama", "kamera tiny SmolVLM2 decoder", T, vocabulary(),
                         dict(pre="gpt-2", bos="<|im_start|>", eos="<|im_end|>", pad="<|im_end|>",
                              unk="<|endoftext|>"),
                         lambda w: w.add_rope_dimension_count(hd))


def main():
    fg.run(SEED, write_mmproj, write_decoder, [
        ("img_144x96.png", lambda p: write_png(p, image(144, 96)))])


if __name__ == "__main__":
    main()
