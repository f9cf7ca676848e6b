#!/usr/bin/python3
# Independent reference for kamera's Qwen2-VL preprocessing (tests/unit/vision/test_qwen_preprocess.cpp),
# written from Hugging Face's Qwen2VLImageProcessor (transformers, image_processing_qwen2_vl.py)
# with Debian's python3-pil and python3-numpy only. Run by hand, never by CI:
#
#   cd tests/data/qwen_preprocess && /usr/bin/python3 make_expected.py
#
# It writes the input images (deterministic content) and expected.json: for each image the sizes,
# the grid, and 64-bit FNV-1a hashes of
#   decoded   PIL's Image.open(...).convert("RGB") pixels, uint8 HWC
#   resized   after smart_resize + PIL BICUBIC resize, uint8 HWC
#   patches   the flattened pixel_values (rescale, normalize, temporal repeat, reshape/transpose),
#             float32 little-endian bytes
# plus the patches' sum and 128 sampled (index, value) pairs.
import json
import math
import struct
import zlib

import numpy as np
from PIL import Image

MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
PATCH, MERGE, TEMPORAL = 14, 2, 2


def smart_resize(height, width, factor, min_pixels, max_pixels):
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def preprocess(img, min_pixels, max_pixels):
    rgb = np.array(img.convert("RGB"))  # HWC uint8
    h, w = rgb.shape[:2]
    rh, rw = smart_resize(h, w, PATCH * MERGE, min_pixels, max_pixels)
    resized = np.array(Image.fromarray(rgb).resize((rw, rh), resample=Image.BICUBIC))
    x = (resized.astype(np.float64) * (1 / 255)).astype(np.float32)  # rescale
    x = (x - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)  # normalize
    x = x.transpose(2, 0, 1)[None]  # (T=1, C, H, W)
    x = np.tile(x, (TEMPORAL, 1, 1, 1))  # an image fills the temporal patch with itself
    gt, gh, gw = x.shape[0] // TEMPORAL, rh // PATCH, rw // PATCH
    x = x.reshape(gt, TEMPORAL, 3, gh // MERGE, MERGE, PATCH, gw // MERGE, MERGE, PATCH)
    x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = x.reshape(gt * gh * gw, 3 * TEMPORAL * PATCH * PATCH)
    return rgb, resized, flat, [gt, gh, gw]


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def make_inputs():
    rs = np.random.RandomState(2024)

    def scene(w, h):
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        r = 128 + 100 * np.sin(xx / 7.0) * np.cos(yy / 11.0)
        g = 255 * xx / max(w - 1, 1)
        b = 255 * (((xx // 8) + (yy // 8)) % 2)
        a = np.stack([r, g, b], axis=-1) + rs.normal(0, 12, (h, w, 3))
        return np.clip(a, 0, 255).astype(np.uint8)

    Image.fromarray(scene(61, 47)).save("rgb_61x47.png")
    Image.fromarray(scene(45, 62)[:, :, 1]).save("grey_45x62.jpg", quality=90)
    alpha = (np.mgrid[0:90, 0:120][1] * 2).astype(np.uint8)[:, :, None]
    rgba = np.concatenate([scene(120, 90), alpha], -1)
    Image.fromarray(rgba, "RGBA").save("rgba_120x90.png")
    Image.fromarray(scene(70, 50)).save("color_70x50.jpg", quality=85, subsampling=2)
    Image.fromarray(scene(20, 30)).quantize(colors=16).save("palette_20x30.png")


def write_png16(path, width, height, color_type, sample):
    """A 16-bit PNG (PIL cannot write 16-bit colour), sample(x, y, c) -> 0..65535."""
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color_type]
    raw = b"".join(b"\x00" + b"".join(struct.pack(">H", sample(x, y, c))
                                        for x in range(width) for c in range(channels))
                   for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 16, color_type, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
                + chunk(b"IEND", b""))


def make_variants():
    """Inputs of the decoder's variant tests; their expected pixels are formulas in the test."""
    Image.new("CMYK", (8, 8), (10, 20, 30, 40)).save("cmyk_8x8.jpg")
    write_png16("rgb16_5x4.png", 5, 4, 2, lambda x, y, c: (x * 4099 + y * 7919 + c * 104729) % 65536)
    write_png16("greyalpha16_5x4.png", 5, 4, 4,
                lambda x, y, c: (x * 5003 + y * 3001) % 65536 if c == 0 else 12345)


CASES = [  # name, min_pixels, max_pixels
    ("rgb_61x47.png", 56 * 56, 12845056),
    ("grey_45x62.jpg", 56 * 56, 12845056),
    ("rgba_120x90.png", 56 * 56, 28 * 28 * 6),  # downscaled past max_pixels
    ("color_70x50.jpg", 56 * 56, 12845056),
    ("palette_20x30.png", 56 * 56, 12845056),  # upscaled to min_pixels
]

if __name__ == "__main__":
    make_inputs()
    make_variants()
    expected = []
    for name, lo, hi in CASES:
        img = Image.open(name)
        mode = img.mode
        rgb, resized, flat, grid = preprocess(img, lo, hi)
        flat = flat.astype("<f4")
        picks = np.random.RandomState(7).randint(0, flat.size, 128)
        expected.append({"file": name, "pil_mode": mode, "min_pixels": lo, "max_pixels": hi,
                         "decoded": [rgb.shape[1], rgb.shape[0]],
                         "decoded_fnv1a64": fnv1a64(rgb.tobytes()),
                         "resized": [resized.shape[1], resized.shape[0]],
                         "resized_fnv1a64": fnv1a64(resized.tobytes()), "grid": grid,
                         "patch_values": flat.shape[1],
                         "patches_fnv1a64": fnv1a64(flat.tobytes()),
                         "patches_sum": float(flat.astype(np.float64).sum()),
                         "samples": [[int(i), float(flat.flat[i])] for i in picks]})
    with open("expected.json", "w") as f:
        json.dump({"mean": MEAN, "std": STD, "cases": expected}, f, indent=1)
