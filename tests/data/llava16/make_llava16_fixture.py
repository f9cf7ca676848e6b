"""Writes a tiny random LLaVA-1.6 (LLaVA-NeXT) tower with llama.cpp's gguf-py, in the layout its
legacy converter (tools/mtmd/legacy-models/convert_image_encoder_to_gguf.py --llava-projector
--clip-model-is-vision, after llava_surgery_v2.py, with a config.json carrying LLaVA-1.6's
image_grid_pinpoints, image_aspect_ratio "anyres" and mm_patch_merge_type "spatial_unpad")
writes it: the LLaVA-1.5 tower of ../llava/make_llava_fixture.py (its own draws; the projector's
matrices in f16, as that script writes a projector checkpoint's 2-D tensors), the flattened
clip.vision.image_grid_pinpoints, and the projector checkpoint's `model.image_newline` (the
converter keeps that name). It goes beside ../llava/decoder.gguf (width 64).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_llava16_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, img_64x32.png, img_40x64.png and img_100x30.png; the same bytes on every run
(tests/data/llava16/README.md).
"""
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llava"))
import make_llava_fixture as base  # noqa: E402

SEED = 21
# LLaVA-1.6's pinpoints [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]] for its
# 336-pixel tower, scaled to the tiny tower's 32 pixels (a symmetric list: which of a pair is the
# height does not change the set)
PINPOINTS = [[32, 64], [64, 32], [64, 64], [96, 32], [32, 96]]


class Writer(gguf.GGUFWriter):
    """The base fixture's writer with LLaVA-1.6's keys and the newline tensor added."""

    def __init__(self, path, arch, rng):
        super().__init__(path, arch)
        self.rng = rng

    def add_tensor(self, name, tensor, *a, **k):
        # the converter writes the projector checkpoint's matrices as f16 even with --use-f32
        if name.startswith("mm.") and tensor.ndim == 2:
            tensor = tensor.astype(np.float16)
        return super().add_tensor(name, tensor, *a, **k)

    def add_name(self, name):
        super().add_name("kamera tiny LLaVA-1.6 tower")

    def write_header_to_file(self, *a, **k):
        flat = [p for pair in PINPOINTS for p in pair]
        self.add_array("clip.vision.image_grid_pinpoints", flat)
        self.add_string("clip.vision.image_aspect_ratio", "anyres")
        self.add_string("clip.vision.mm_patch_merge_type", "spatial_unpad")
        self.add_string("clip.vision.mm_projector_type", "mlp2x_gelu")
        # the projector checkpoint's image_newline [out] (torch.randn / sqrt(out) in LLaVA-NeXT)
        nl = (self.rng.standard_normal(base.T["dim"]) / np.sqrt(base.T["dim"])).astype(np.float32)
        self.add_tensor("model.image_newline", nl)
        return super().write_header_to_file(*a, **k)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    rng = np.random.default_rng(SEED)
    real = gguf.GGUFWriter
    base.gguf.GGUFWriter = lambda path, arch: Writer(path, arch, np.random.default_rng(SEED + 7))
    try:
        base.write_mmproj(f"{out}/mmproj.gguf", rng)
    finally:
        base.gguf.GGUFWriter = real
    base.write_png(f"{out}/img_64x32.png", base.image(64, 32))
    base.write_png(f"{out}/img_40x64.png", base.image(40, 64))
    base.write_png(f"{out}/img_100x30.png", base.image(100, 30))


if __name__ == "__main__":
    main()
