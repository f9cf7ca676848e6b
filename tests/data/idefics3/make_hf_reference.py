#!/usr/bin/python3
"""Independent reference for kamera's SmolVLM preprocessing (tests/unit/vision/test_idefics3_preprocess.cpp),
written from Hugging Face's Idefics3ImageProcessor (transformers, image_processing_idefics3.py:
resize to longest_edge, resize_for_vision_encoder, split_image; resample LANCZOS) with Debian's
python3-pil and python3-numpy only. Run by hand, never by CI:

    cd tests/data/idefics3 && /usr/bin/python3 make_hf_reference.py

It reads img_144x96.png and draws four more pictures (drawn(): integer arithmetic the test repeats)
and writes hf_reference.json: per picture the sizes after each step, the grid, and the 64-bit
FNV-1a hash of every tile's uint8 HWC pixels (raster tiles, then the global image), for the tiny
tower's tile of 48 and longest edge 144.
"""
import json
import math

import numpy as np
from PIL import Image

TILE, LONGEST, MAX_IMAGE_SIZE = 48, 144, 4096


def fnv1a(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def rescale_to_max_len(h, w, max_len):
    aspect = w / h
    if w >= h:
        w = max_len
        h = int(w / aspect)
        if h % 2 != 0:
            h += 1
    else:
        h = max_len
        w = int(h * aspect)
        if w % 2 != 0:
            w += 1
    return max(h, 1), max(w, 1)


def below_upper_bound(h, w, max_len):
    aspect = w / h
    if w >= h and w > max_len:
        w = max_len
        h = int(w / aspect)
    elif h > w and h > max_len:
        h = max_len
        w = int(h * aspect)
    return max(h, 1), max(w, 1)


def for_vision_encoder(h, w, tile):
    aspect = w / h
    if w >= h:
        w = math.ceil(w / tile) * tile
        h = int(w / aspect)
        h = math.ceil(h / tile) * tile
    else:
        h = math.ceil(h / tile) * tile
        w = int(h * aspect)
        w = math.ceil(w / tile) * tile
    return h, w


def process(img):
    h, w = below_upper_bound(*rescale_to_max_len(img.height, img.width, LONGEST), MAX_IMAGE_SIZE)
    step1 = img.resize((w, h), resample=Image.LANCZOS)
    h2, w2 = for_vision_encoder(h, w, TILE)
    step2 = step1.resize((w2, h2), resample=Image.LANCZOS)
    a = np.array(step2)
    tiles, rows, cols = [], 0, 0
    if h2 > TILE or w2 > TILE:
        rows, cols = math.ceil(h2 / TILE), math.ceil(w2 / TILE)
        oh, ow = math.ceil(h2 / rows), math.ceil(w2 / cols)
        for r in range(rows):
            for c in range(cols):
                tiles.append(a[r * oh:min(r * oh + oh, h2), c * ow:min(c * ow + ow, w2)])
        if (h2, w2) != (TILE, TILE):
            a = np.array(step2.resize((TILE, TILE), resample=Image.LANCZOS))
    tiles.append(a)
    return dict(step1=[w, h], step2=[w2, h2], rows=rows, cols=cols,
                tiles=[fnv1a(np.ascontiguousarray(t).tobytes()) for t in tiles])


def drawn(w, h, seed):
    """Integer texture the test draws the same way: channel c of (x, y) is
    (x * x * (3 + c) + y * (11 + seed) + x * y * (5 + c + seed)) % 256."""
    rgb = np.zeros((h, w, 3), dtype=np.uint8)
    for y in range(h):
        for x in range(w):
            for c in range(3):
                rgb[y, x, c] = (x * x * (3 + c) + y * (11 + seed) + x * y * (5 + c + seed)) % 256
    return Image.fromarray(rgb, "RGB")


def main():
    cases = {"img_144x96.png": Image.open("img_144x96.png").convert("RGB")}
    for w, h, seed in [(100, 70, 1), (37, 90, 2), (30, 20, 3), (500, 61, 4)]:
        name = f"drawn_{w}x{h}_{seed}"
        cases[name] = drawn(w, h, seed)
        cases[name + ".fnv"] = fnv1a(np.array(cases[name]).tobytes())
    out = {"tile": TILE, "longest_edge": LONGEST, "cases": []}
    for name, img in cases.items():
        if name.endswith(".fnv"):
            continue
        r = process(img)
        r["name"] = name
        r["size"] = [img.width, img.height]
        if name + ".fnv" in cases:
            r["pixels"] = cases[name + ".fnv"]
        out["cases"].append(r)
    with open("hf_reference.json", "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
