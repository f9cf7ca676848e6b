"""Writes tiny random MobileVLM V2 and MobileVLM towers with llama.cpp's gguf-py, in the layout its
legacy converter (tools/mtmd/legacy-models/convert_image_encoder_to_gguf.py --llava-projector
--projector-type ldpv2 / ldp, docs/multimodal/MobileVLM.md) writes them: the CLIP tower of
../llava/make_llava_fixture.py (its own draws) on 96-pixel pictures in patches of 4 (24 x 24
patches: llama.cpp's ldpv2 graph assumes a side of 24, as CLIP ViT-L/14-336 has), and MobileVLM
V2's projector as the converter renames model.mm_projector.mlp.mlp.{0,2} and
model.mm_projector.peg.peg.0: mm.model.mlp.{0,2}.{weight,bias} (matrices f16), mm.model.peg.0.weight
(torch's [out, 1, 3, 3] squeezed to [out, 3, 3], f16) and its bias; and MobileVLM's LDPBlock
(model.mm_projector.model.{mlp.{1,3}, mb_block.{1,2}.block...}: mm.model.mlp.{1,3} and two
InvertedResidual blocks, each a depthwise kernel, a LayerNorm, a squeeze-excitation of width 16
(fc1 / fc2, torch's 1 x 1 convolutions squeezed), a pointwise kernel and a LayerNorm; 4-D
tensors f16). They go beside ../llava/decoder.gguf (width 64).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_mobilevlm_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf (ldpv2), OUT_DIR/mmproj_ldp.gguf and img_96.png; the same bytes on
every run (tests/data/mobilevlm/README.md).
"""
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llava"))
import make_llava_fixture as base  # noqa: E402

SEED = 31
SQUEEZE = 16  # torchvision's _make_divisible(64 // 4, 8)


class Writer(gguf.GGUFWriter):
    """The base fixture's writer with MobileVLM's projector type, names and blocks."""

    def __init__(self, path, arch, rng, kind):
        super().__init__(path, arch)
        self.rng, self.kind = rng, kind
        i, j = (1, 3) if kind == "ldp" else (0, 2)
        self.rename = {"mm.0.weight": f"mm.model.mlp.{i}.weight", "mm.0.bias": f"mm.model.mlp.{i}.bias",
                       "mm.2.weight": f"mm.model.mlp.{j}.weight", "mm.2.bias": f"mm.model.mlp.{j}.bias"}

    def add_string(self, key, val):
        super().add_string(key, self.kind if key == "clip.projector_type" else val)

    def add_name(self, name):
        super().add_name(f"kamera tiny MobileVLM tower ({self.kind})")

    def add_tensor(self, name, tensor, *a, **k):
        name = self.rename.get(name, name)
        if name.startswith("mm.") and tensor.ndim == 2:
            tensor = tensor.astype(np.float16)
        return super().add_tensor(name, tensor, *a, **k)

    def write_header_to_file(self, *a, **k):
        o, r = base.T["dim"], self.rng
        if self.kind == "ldpv2":
            self.add_tensor("mm.model.peg.0.weight", base.rnd(r, (o, 3, 3), "w", 9).astype(np.float16))
            self.add_tensor("mm.model.peg.0.bias", base.rnd(r, (o,), "b"))
        for blk in (1, 2):
            if self.kind != "ldp":
                break
            b = f"mm.model.mb_block.{blk}.block."
            self.add_tensor(b + "0.0.weight", base.rnd(r, (o, 3, 3), "w", 9).astype(np.float16))
            self.add_tensor(b + "0.1.weight", base.rnd(r, (o,), "n"))
            self.add_tensor(b + "0.1.bias", base.rnd(r, (o,), "b"))
            self.add_tensor(b + "1.fc1.weight", base.rnd(r, (SQUEEZE, o), "w", o).astype(np.float16))
            self.add_tensor(b + "1.fc1.bias", base.rnd(r, (SQUEEZE,), "b"))
            self.add_tensor(b + "1.fc2.weight", base.rnd(r, (o, SQUEEZE), "w", SQUEEZE).astype(np.float16))
            self.add_tensor(b + "1.fc2.bias", base.rnd(r, (o,), "b"))
            self.add_tensor(b + "2.0.weight", base.rnd(r, (o, o), "w", o).astype(np.float16))
            self.add_tensor(b + "2.1.weight", base.rnd(r, (o,), "n"))
            self.add_tensor(b + "2.1.bias", base.rnd(r, (o,), "b"))
        return super().write_header_to_file(*a, **k)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    base.V["image_size"] = 96
    real = gguf.GGUFWriter
    for kind, name, seed in [("ldpv2", "mmproj.gguf", SEED), ("ldp", "mmproj_ldp.gguf", SEED + 1)]:
        base.gguf.GGUFWriter = lambda path, arch: Writer(path, arch, np.random.default_rng(seed + 7), kind)
        try:
            base.write_mmproj(f"{out}/{name}", np.random.default_rng(seed))
        finally:
            base.gguf.GGUFWriter = real
    base.write_png(f"{out}/img_96.png", base.image(96, 96))


if __name__ == "__main__":
    main()
