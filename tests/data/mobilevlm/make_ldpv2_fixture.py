"""Writes a tiny random MobileVLM V2 tower with llama.cpp's gguf-py, in the layout its legacy
converter (tools/mtmd/legacy-models/convert_image_encoder_to_gguf.py --llava-projector
--projector-type ldpv2, docs/multimodal/MobileVLM.md) writes it: the CLIP tower of
../llava/make_llava_fixture.py (its own draws) on 96-pixel pictures in patches of 4 (24 x 24
patches: llama.cpp's ldpv2 graph assumes a side of 24, as CLIP ViT-L/14-336 has), and MobileVLM
V2's projector as the converter renames model.mm_projector.mlp.mlp.{0,2} and
model.mm_projector.peg.peg.0: mm.model.mlp.{0,2}.{weight,bias} (matrices f16), mm.model.peg.0.weight
(torch's [out, 1, 3, 3] squeezed to [out, 3, 3], f16) and its bias. It goes beside
../llava/decoder.gguf (width 64).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_ldpv2_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf and img_96.png; the same bytes on every run
(tests/data/mobilevlm/README.md).
"""
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llava"))
import make_llava_fixture as base  # noqa: E402

SEED = 31
RENAME = {"mm.0.weight": "mm.model.mlp.0.weight", "mm.0.bias": "mm.model.mlp.0.bias",
          "mm.2.weight": "mm.model.mlp.2.weight", "mm.2.bias": "mm.model.mlp.2.bias"}


class Writer(gguf.GGUFWriter):
    def __init__(self, path, arch, rng):
        super().__init__(path, arch)
        self.rng = rng

    def add_string(self, key, val):
        super().add_string(key, "ldpv2" if key == "clip.projector_type" else val)

    def add_name(self, name):
        super().add_name("kamera tiny MobileVLM V2 tower")

    def add_tensor(self, name, tensor, *a, **k):
        name = RENAME.get(name, name)
        if name.startswith("mm.") and tensor.ndim == 2:
            tensor = tensor.astype(np.float16)
        return super().add_tensor(name, tensor, *a, **k)

    def write_header_to_file(self, *a, **k):
        o = base.T["dim"]
        self.add_tensor("mm.model.peg.0.weight", base.rnd(self.rng, (o, 3, 3), "w", 9).astype(np.float16))
        self.add_tensor("mm.model.peg.0.bias", base.rnd(self.rng, (o,), "b"))
        return super().write_header_to_file(*a, **k)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    base.V["image_size"] = 96
    real = gguf.GGUFWriter
    base.gguf.GGUFWriter = lambda path, arch: Writer(path, arch, np.random.default_rng(SEED + 7))
    try:
        base.write_mmproj(f"{out}/mmproj.gguf", np.random.default_rng(SEED))
    finally:
        base.gguf.GGUFWriter = real
    base.write_png(f"{out}/img_96.png", base.image(96, 96))


if __name__ == "__main__":
    main()
