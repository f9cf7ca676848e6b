#!/usr/bin/python3
"""kamera.Chunk.from_audio on the committed tiny Qwen2.5-Omni pair (tests/data/qwen25o: the audio
half of a two-half mmproj beside a qwen2vl thinker, a 2-s 16 kHz clip), against `kamera logits
--mmproj --audio` (the CLI's own decode, 16 kHz, log-mel, encode and placement path): the clip
chunk evaluated after the prompt's text gives the CLI's next-token logits within 1e-5 of their
scale, a path and the same file's bytes are one chunk encoded once, the clip relocated behind
other chunks with a full-rank patch answers as a re-prefill (1e-4 of the scale) where blind reuse
does not, and bad audio raises kamera.Error with a code and a message.

  PYTHONPATH=build/python KAMERA_BIN=build/bin/kamera /usr/bin/python3 tests/python/test_audio.py
"""
import json
import os
import subprocess
import unittest

import numpy as np

import kamera

ROOT = os.environ.get("KAMERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
KAMERA = os.environ.get("KAMERA_BIN", os.path.join(ROOT, "build", "bin", "kamera"))
DATA = os.path.join(ROOT, "tests", "data", "qwen25o")
DEC, MM, CLIP = (os.path.join(DATA, f) for f in ("decoder.gguf", "mmproj.gguf", "clip_16k.wav"))
PROMPT = "<|im_start|>user\n<|audio_bos|><audio><|audio_eos|>the<|im_end|>\n<|im_start|>assistant\n"


class Audio(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        out = subprocess.run([KAMERA, "logits", "-m", DEC, "--mmproj", MM, "--audio", CLIP, "-t",
                              "1", "--json", "-p", PROMPT],
                             check=True, capture_output=True, text=True).stdout
        j = json.loads(out)
        cls.before, cls.after = j["pieces"][0]["tokens"], j["pieces"][2]["tokens"]
        cls.reference = np.asarray(j["logits"][0], np.float32)
        cls.model = kamera.Model(DEC)

    def test_logits_match_the_cli(self):
        ctx = kamera.Context(self.model, n_threads=1)
        clip = kamera.Chunk.from_audio(ctx, kamera.Vision(MM), CLIP)
        self.assertEqual((len(clip), clip.extent), (750, 750))  # positions (i, i, i)
        seq = ctx.sequence()
        seq.eval(self.before, logits="none")
        seq.eval(clip, logits="none")
        got = seq.eval(self.after)
        scale = max(1.0, float(np.abs(self.reference).max()))
        self.assertLessEqual(float(np.abs(got - self.reference).max()), 1e-5 * scale)

    def test_path_and_bytes_are_one_chunk_relocated_exactly(self):
        ctx = kamera.Context(self.model, n_threads=1)
        vision = kamera.Vision(MM)
        self.assertEqual(vision.out_dim, self.model.dim)
        a = kamera.Chunk.from_audio(ctx, vision, CLIP)
        with open(CLIP, "rb") as f:
            b = kamera.Chunk.from_audio(ctx, vision, f.read())
        self.assertEqual(a.id, b.id)
        self.assertEqual((vision.stats["encodes"], vision.stats["hits"]), (1, 1))
        pad = kamera.Chunk(self.model, [5, 9, 17, 3, 11, 30, 2, 40, 41])
        text = kamera.Chunk(self.model, self.before)
        re = ctx.assemble([pad, text, a], policy="reprefill").eval(self.after)
        pa = ctx.assemble([pad, text, a], policy="patch", rank="full").eval(self.after)
        bl = ctx.assemble([pad, text, a], policy="blind").eval(self.after)
        scale = max(1.0, float(np.abs(re).max()))
        print(f"relocated clip: full-rank patch |d| {np.abs(pa - re).max():.3g}, "
              f"blind |d| {np.abs(bl - re).max():.3g} (scale {scale:.3g})")
        self.assertLessEqual(float(np.abs(pa - re).max()), 1e-4 * scale)
        self.assertGreater(float(np.abs(bl - re).max()), 1e-4 * scale)

    def test_bad_audio_raises(self):
        ctx = kamera.Context(self.model, n_threads=1)
        vision = kamera.Vision(MM)
        with self.assertRaises(kamera.Error) as e:
            kamera.Chunk.from_audio(ctx, vision, b"not audio")
        self.assertEqual(e.exception.name, "unsupported")
        with open(CLIP, "rb") as f:
            data = f.read()
        with self.assertRaises(kamera.Error) as e:
            kamera.Chunk.from_audio(ctx, vision, data[: len(data) // 2])
        self.assertEqual(e.exception.name, "corrupt_data")
        self.assertIn("truncated", str(e.exception))
        with self.assertRaises(kamera.Error) as e:  # a picture tower reads no audio
            kamera.Chunk.from_audio(ctx, kamera.Vision(os.path.join(ROOT, "tests", "data", "llava",
                                                                    "mmproj.gguf")), CLIP)
        self.assertIn("picture tower", str(e.exception))


if __name__ == "__main__":
    unittest.main()
