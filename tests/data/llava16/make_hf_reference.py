#!/usr/bin/python3
"""Independent reference for kamera's LLaVA-1.6 any-resolution grid (tests/unit/vision/
test_llava_anyres.cpp), written from Hugging Face's LlavaNextImageProcessor and
LlavaNextForConditionalGeneration (transformers: image_processing_llava_next.py's
get_image_patches, _resize_for_patching, _pad_for_patching, divide_to_patches;
image_processing_utils.select_best_resolution; modeling_llava_next.py's
get_anyres_image_grid_shape, unpad_image, pack_image_features) with Debian's python3-pil and
python3-numpy only. Run by hand, never by CI:

    cd tests/data/llava16 && /usr/bin/python3 make_hf_reference.py

Writes hf_reference.json: for the tiny tower (32-pixel tiles in 4-pixel patches, the fixture's
pinpoints read as Hugging Face reads them, (height, width)) and each picture size, the best
resolution, the resized size and paste offset, the grid, the unpadded box of the grid's features
and the picture's row count; for three sizes the order pack_image_features gives the grid's rows
(tile * side^2 + row, -1 for the newline row); for the committed pictures (img_64x32, img_40x64, img_100x30) the
64-bit FNV-1a hash of the base image's and every tile's uint8 HWC pixels. Where llama.cpp's dumps
are present (llama_cpp_WxH_embd.f32: mtmd's tiles, then its overview) it also writes
hf_pack_WxH.f32: pack_image_features on llama.cpp's tile rows (the base image's rows left out:
the two sides resize it differently) with the file's image_newline.
"""
import json
import math
import os

import numpy as np
from PIL import Image

TILE, PATCH = 32, 4
SIDE = TILE // PATCH
PINPOINTS = [[32, 64], [64, 32], [64, 64], [96, 32], [32, 96]]  # as make_llava16_fixture.py
SIZES = [(64, 32), (40, 64), (100, 30), (32, 32), (20, 20), (50, 90), (70, 70), (33, 31),
         (90, 45), (200, 50), (31, 97), (65, 33)]
PICTURES = ["img_64x32.png", "img_40x64.png", "img_100x30.png"]


def fnv1a(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def select_best_resolution(original_size, possible_resolutions):
    original_height, original_width = original_size
    best_fit, max_eff, min_waste = None, 0, float("inf")
    for height, width in possible_resolutions:
        scale = min(width / original_width, height / original_height)
        dw, dh = int(original_width * scale), int(original_height * scale)
        eff = min(dw * dh, original_width * original_height)
        waste = width * height - eff
        if eff > max_eff or (eff == max_eff and waste < min_waste):
            max_eff, min_waste, best_fit = eff, waste, (height, width)
    return best_fit


def get_patch_output_size(original_height, original_width, target_resolution):
    target_height, target_width = target_resolution
    scale_w = target_width / original_width
    scale_h = target_height / original_height
    if scale_w < scale_h:
        new_width = target_width
        new_height = min(math.ceil(original_height * scale_w), target_height)
    else:
        new_height = target_height
        new_width = min(math.ceil(original_width * scale_h), target_width)
    return new_height, new_width


def unpad_box(current_height, current_width, original_height, original_width):
    """unpad_image's slice of a (dim, current_height, current_width) tensor: (r0, r1, c0, c1)."""
    original_aspect_ratio = original_width / original_height
    current_aspect_ratio = current_width / current_height
    if original_aspect_ratio > current_aspect_ratio:
        scale_factor = current_width / original_width
        new_height = int(round(original_height * scale_factor, 7))
        padding = (current_height - new_height) // 2
        return padding, current_height - padding, 0, current_width
    scale_factor = current_height / original_height
    new_width = int(round(original_width * scale_factor, 7))
    padding = (current_width - new_width) // 2
    return 0, current_height, padding, current_width - padding


def plan(w, h):
    best = select_best_resolution((h, w), PINPOINTS)
    nh, nw = get_patch_output_size(h, w, best)
    rows, cols = best[0] // TILE, best[1] // TILE
    r0, r1, c0, c1 = unpad_box(rows * SIDE, cols * SIDE, h, w)
    n = SIDE * SIDE + (r1 - r0) * (c1 - c0 + 1)
    return dict(width=w, height=h, best_height=best[0], best_width=best[1], resized_height=nh,
                resized_width=nw, paste_y=(best[0] - nh) // 2, paste_x=(best[1] - nw) // 2,
                grid_rows=rows, grid_cols=cols, unpad=[r0, r1, c0, c1], rows=n)


def pictures(path):
    img = Image.open(path).convert("RGB")
    w, h = img.size
    p = plan(w, h)
    resized = img.resize((p["resized_width"], p["resized_height"]), Image.BICUBIC)
    padded = np.zeros((p["best_height"], p["best_width"], 3), np.uint8)
    padded[p["paste_y"]:p["paste_y"] + p["resized_height"],
           p["paste_x"]:p["paste_x"] + p["resized_width"]] = np.asarray(resized)
    tiles = [padded[y:y + TILE, x:x + TILE] for y in range(0, p["best_height"], TILE)
             for x in range(0, p["best_width"], TILE)]
    base = np.asarray(img.resize((TILE, TILE), Image.BICUBIC))
    return [fnv1a(np.ascontiguousarray(t).tobytes()) for t in [base] + tiles]


def newline():
    import gguf  # PYTHONPATH=/tmp/llama-ref/gguf-py, only for the packs
    r = gguf.GGUFReader("mmproj.gguf")
    return next(np.array(t.data, np.float32) for t in r.tensors if t.name == "model.image_newline")


def pack_rows(p, tile_rows, nl):
    """pack_image_features' grid on (tiles, side * side, dim) rows and the newline row nl."""
    n_tiles, dim = p["grid_rows"] * p["grid_cols"], nl.size
    f = tile_rows.reshape(p["grid_rows"], p["grid_cols"], SIDE, SIDE, dim)
    f = f.transpose(4, 0, 2, 1, 3).reshape(dim, p["grid_rows"] * SIDE, p["grid_cols"] * SIDE)
    r0, r1, c0, c1 = p["unpad"]
    f = f[:, r0:r1, c0:c1]
    f = np.concatenate([f, np.broadcast_to(nl[:, None, None], (dim, f.shape[1], 1))], -1)
    return np.ascontiguousarray(f.reshape(dim, -1).T)


def pack_order(p):
    """The grid's rows as indices tile * side^2 + row (-1: the newline row)."""
    n = p["grid_rows"] * p["grid_cols"] * SIDE * SIDE
    return [int(v) for v in pack_rows(p, np.arange(n, dtype=np.float64), np.array([-1.0]))[:, 0]]


def pack(w, h, nl):
    """pack_image_features on llama.cpp's tile rows (its dump: the tiles, then its overview)."""
    p = plan(w, h)
    n_tiles, dim = p["grid_rows"] * p["grid_cols"], nl.size
    rows = np.fromfile(f"llama_cpp_{w}x{h}_embd.f32", np.float32).reshape(-1, dim)
    return pack_rows(p, rows[: n_tiles * SIDE * SIDE], nl)


def main():
    out = {"tile": TILE, "patch": PATCH, "pinpoints": PINPOINTS,
           "plans": [plan(w, h) for w, h in SIZES],
           "pack_orders": {f"{w}x{h}": pack_order(plan(w, h)) for w, h in [(40, 64), (65, 33), (200, 50)]},
           "pictures": {f: pictures(f) for f in PICTURES}}
    with open("hf_reference.json", "w") as f:
        json.dump(out, f, indent=1)
    for w, h in [(64, 32), (40, 64)]:
        if os.path.exists(f"llama_cpp_{w}x{h}_embd.f32"):
            pack(w, h, newline()).astype("<f4").tofile(f"hf_pack_{w}x{h}.f32")


if __name__ == "__main__":
    main()
