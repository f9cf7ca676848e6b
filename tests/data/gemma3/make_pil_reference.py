#!/usr/bin/python3
"""Independent reference for kamera's Gemma 3 resize (tests/unit/vision/test_gemma3_vision.cpp):
Hugging Face's Gemma3ImageProcessor resizes with PIL's BILINEAR filter to the tower's size (aspect
not kept, do_pan_and_scan off). With Debian's python3-pil and python3-numpy only; run by hand:

    cd tests/data/gemma3 && /usr/bin/python3 make_pil_reference.py

It resizes img_64.png to each size below (down- and upscaled, each side alone, and back to 64 x 64
from a resized copy) and writes pil_bilinear.json: per case the source and output sizes and the
64-bit FNV-1a hash of the output's uint8 HWC pixels.
"""
import json

import numpy as np
from PIL import Image


def fnv1a(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def main():
    src = Image.open("img_64.png").convert("RGB")
    cases = []
    for w, h in [(37, 90), (100, 70), (64, 23), (13, 64), (200, 150)]:
        out = src.resize((w, h), Image.BILINEAR)
        back = out.resize((64, 64), Image.BILINEAR)
        cases.append({"width": w, "height": h,
                      "pixels": fnv1a(np.asarray(out, dtype=np.uint8).tobytes()),
                      "back_to_64": fnv1a(np.asarray(back, dtype=np.uint8).tobytes())})
    with open("pil_bilinear.json", "w") as f:
        json.dump({"source": "img_64.png", "filter": "PIL BILINEAR", "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
