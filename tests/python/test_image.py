#!/usr/bin/python3
"""kamera.Chunk.from_image on tiny random-weight Qwen2-VL, Qwen3-VL and Kimi-VL files written by
`kamera make-model` (and the committed SmolVLM, Gemma 3, InternVL and LLaVA-1.5 pairs of
tests/data),
against `kamera logits --mmproj --image` (the CLI's own decode, preprocess, encode and placement
path): the image chunk evaluated after the prompt's text gives the CLI's next-token logits within
1e-5 of their scale, a path and the same file's bytes are one chunk encoded once, and bad images
raise kamera.Error with a code and a message.

  PYTHONPATH=build/python KAMERA_BIN=build/bin/kamera /usr/bin/python3 tests/python/test_image.py
"""
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np

import kamera

ROOT = os.environ.get("KAMERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
KAMERA = os.environ.get("KAMERA_BIN", os.path.join(ROOT, "build", "bin", "kamera"))
IMAGE = os.path.join(ROOT, "tests", "data", "qwen_vision", "img_140x112.png")
PROMPT = "look <|vision_start|><image><|vision_end|> now"


class Image(unittest.TestCase):
    ARCH = "qwen2vl"
    DECODER = ("qwen2vl", "tiny")  # make-model --arch, --preset
    TOWER = ("qwen2vl-mmproj", "tiny")
    PROMPT = PROMPT
    IMAGE = IMAGE
    COMMITTED = False  # the pair of tests/data/<ARCH> instead of make-model's

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dec = os.path.join(cls.tmp.name, "dec.gguf")
        cls.mm = os.path.join(cls.tmp.name, "mmproj.gguf")
        if cls.COMMITTED:
            cls.dec = os.path.join(ROOT, "tests", "data", cls.ARCH, "decoder.gguf")
            cls.mm = os.path.join(ROOT, "tests", "data", cls.ARCH, "mmproj.gguf")
        for (arch, preset), seed, path in ((cls.DECODER, 3, cls.dec), (cls.TOWER, 4, cls.mm)):
            if cls.COMMITTED:
                break
            subprocess.run([KAMERA, "make-model", "--arch", arch, "--preset", preset, "--seed",
                            str(seed), "-o", path], check=True, capture_output=True)
        out = subprocess.run([KAMERA, "logits", "-m", cls.dec, "--mmproj", cls.mm, "--image",
                              cls.IMAGE, "-t", "1", "--json", "-p", cls.PROMPT],
                             check=True, capture_output=True, text=True).stdout
        j = json.loads(out)
        cls.before, cls.after = j["pieces"][0]["tokens"], j["pieces"][2]["tokens"]
        cls.reference = np.asarray(j["logits"][0], np.float32)
        cls.model = kamera.Model(cls.dec)
        cls.vision = kamera.Vision(cls.mm)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_logits_match_the_cli(self):
        ctx = kamera.Context(self.model, n_threads=1)
        img = kamera.Chunk.from_image(ctx, self.vision, self.IMAGE)
        self.assertGreater(len(img), 0)
        seq = ctx.sequence()
        seq.eval(self.before, logits="none")
        seq.eval(img, logits="none")
        got = seq.eval(self.after)
        scale = max(1.0, float(np.abs(self.reference).max()))
        self.assertLessEqual(float(np.abs(got - self.reference).max()), 1e-5 * scale)

    def test_path_and_bytes_are_one_chunk(self):
        ctx = kamera.Context(self.model, n_threads=1)
        vision = kamera.Vision(self.mm)
        a = kamera.Chunk.from_image(ctx, vision, self.IMAGE)
        with open(self.IMAGE, "rb") as f:
            b = kamera.Chunk.from_image(ctx, vision, f.read())
        self.assertEqual(a.id, b.id)
        self.assertEqual((vision.stats["encodes"], vision.stats["hits"]), (1, 1))
        if self.COMMITTED:
            # one picture per chunk on linear positions; several frames refused by name
            self.assertEqual(vision.out_dim, self.model.dim)
            self.assertEqual(a.extent, len(a))
            with self.assertRaises(kamera.Error) as e:
                kamera.Chunk.from_frames(ctx, vision, [self.IMAGE] * 2)
            self.assertEqual(e.exception.name, "invalid_argument")
            self.assertIn("one picture", str(e.exception))
            return
        if self.ARCH == "kimivl":
            # rows of the decoder's width on linear positions; one picture per chunk
            self.assertEqual(vision.out_dim, self.model.dim)
            self.assertEqual(a.extent, len(a))
            with self.assertRaises(kamera.Error) as e:
                kamera.Chunk.from_frames(ctx, vision, [self.IMAGE] * 2)
            self.assertEqual(e.exception.name, "unsupported")
            self.assertIn("Kimi-VL", str(e.exception))
            return
        if self.ARCH == "qwen3vl":
            # rows of the decoder's width and its 2 deepstack slices; video is pairs with
            # timestamps between, so more than one pair in a chunk is refused by name
            self.assertEqual(vision.out_dim, 3 * self.model.dim)
            with self.assertRaises(kamera.Error) as e:
                kamera.Chunk.from_frames(ctx, vision, [self.IMAGE] * 4)
            self.assertEqual(e.exception.name, "unsupported")
            self.assertIn("Qwen3-VL", str(e.exception))
            return
        self.assertEqual(vision.out_dim, self.model.dim)
        video = kamera.Chunk.from_frames(ctx, vision, [self.IMAGE] * 4)
        self.assertEqual(len(video), 2 * len(a))  # 4 frames: 2 temporal slices

    def test_bad_images_raise(self):
        ctx = kamera.Context(self.model, n_threads=1)
        with self.assertRaises(kamera.Error) as e:
            kamera.Chunk.from_image(ctx, self.vision, b"not an image")
        self.assertEqual(e.exception.name, "invalid_argument")
        with open(self.IMAGE, "rb") as f:
            data = f.read()
        with self.assertRaises(kamera.Error) as e:
            kamera.Chunk.from_image(ctx, self.vision, data[: len(data) // 2])
        self.assertEqual(e.exception.name, "corrupt_data")
        with self.assertRaises(kamera.Error) as e:
            kamera.Chunk.from_image(ctx, self.vision, os.path.join(self.tmp.name, "absent.png"))
        self.assertIn("absent.png", str(e.exception))


class Qwen3VlImage(Image):
    """The same on a Qwen3-VL pair: image rows with deepstack slices, interleaved M-RoPE."""
    ARCH = "qwen3vl"
    DECODER = ("qwen3vl", "tiny")
    TOWER = ("qwen3vl-mmproj", "tiny")


class KimiVlImage(Image):
    """The same on a Kimi-VL pair: MoonViT beside a deepseek2 (MLA) decoder, the picture on
    linear positions; make-model's random vocabulary has no <|media_start|> tokens, so the prompt
    writes none."""
    ARCH = "kimivl"
    DECODER = ("deepseek2", "kimi-vl-tiny")
    TOWER = ("kimivl-mmproj", "tiny")
    PROMPT = "look <image> now"
    IMAGE = os.path.join(ROOT, "tests", "data", "kimivl", "img_112x112.png")



def committed(arch, image, prompt, doc):
    """The test on the committed tiny pair of tests/data/<arch> (written by llama.cpp's gguf-py)."""
    return type(arch.capitalize() + "Image", (Image,), {
        "__doc__": doc, "ARCH": arch, "COMMITTED": True, "PROMPT": prompt,
        "IMAGE": os.path.join(ROOT, "tests", "data", arch, image)})


Idefics3Image = committed("idefics3", "img_144x96.png", "look <image> now",
                          "SmolVLM: 6 tiles and the global image, their tokens in the chunk.")
Gemma3Image = committed("gemma3", "img_64.png", "look <start_of_image><image><end_of_image> now",
                        "Gemma 3: the pooled rows between its delimiters.")
InternvlImage = committed("internvl", "img_64.png", "look <img><image></img> now",
                          "InternVL: 2 x 2 tiles and a thumbnail between <img> and </img>.")
LlavaImage = committed("llava", "img_32.png", "look <image> now",
                       "LLaVA-1.5: CLIP's rows through the MLP projector, standing alone.")

if __name__ == "__main__":
    unittest.main()
