#!/usr/bin/python3
"""Independent reference for kamera's InternVL tiles (tests/unit/vision/test_internvl_vision.cpp):
the model card's dynamic_preprocess (InternVL 2.5 / 3's chat code: the grid nearest the picture's
aspect among min..max tiles, PIL's resize to the grid, tiles row by row, a thumbnail when there is
more than one tile) written here with Debian's python3-pil and python3-numpy; run by hand:

    cd tests/data/internvl && /usr/bin/python3 make_pil_tiles.py

It cuts img_32.png resized (BICUBIC) to each size below with the tower's image_size 32 and tiles
1..12, and writes pil_tiles.json: per case the picture's size, the grid and the 64-bit FNV-1a hash
of each tile's uint8 HWC pixels.
"""
import json

import numpy as np
from PIL import Image

SIZE, MIN_TILES, MAX_TILES = 32, 1, 12


def fnv1a(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def nearest_grid(aspect, grids, width, height):
    best_diff, best = float("inf"), (1, 1)
    for g in grids:
        diff = abs(aspect - g[0] / g[1])
        if diff < best_diff:
            best_diff, best = diff, g
        elif diff == best_diff and width * height > 0.5 * SIZE * SIZE * g[0] * g[1]:
            best = g
    return best


def tiles(img):
    w, h = img.size
    grids = sorted({(i, j) for n in range(MIN_TILES, MAX_TILES + 1) for i in range(1, n + 1)
                    for j in range(1, n + 1) if MIN_TILES <= i * j <= MAX_TILES},
                   key=lambda g: g[0] * g[1])
    cols, rows = nearest_grid(w / h, grids, w, h)
    big = img.resize((cols * SIZE, rows * SIZE), Image.BICUBIC)
    out = [big.crop((c * SIZE, r * SIZE, (c + 1) * SIZE, (r + 1) * SIZE))
           for r in range(rows) for c in range(cols)]
    if len(out) != 1:
        out.append(img.resize((SIZE, SIZE), Image.BICUBIC))
    return (cols, rows), out


def main():
    src = Image.open("img_32.png").convert("RGB")
    cases = []
    for w, h in [(32, 32), (64, 64), (70, 40), (50, 90), (100, 30), (20, 20), (41, 300)]:
        pic = src.resize((w, h), Image.BICUBIC)
        grid, ts = tiles(pic)
        cases.append({"width": w, "height": h, "cols": grid[0], "rows": grid[1],
                      "picture": fnv1a(np.asarray(pic, dtype=np.uint8).tobytes()),
                      "tiles": [fnv1a(np.asarray(t, dtype=np.uint8).tobytes()) for t in ts]})
    with open("pil_tiles.json", "w") as f:
        json.dump({"source": "img_32.png", "image_size": SIZE, "min_tiles": MIN_TILES,
                   "max_tiles": MAX_TILES, "filter": "PIL BICUBIC", "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
