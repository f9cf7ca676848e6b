#!/usr/bin/python3
"""The Python binding on tiny random-weight qwen3, qwen3moe, qwen3vl and qwen3vlmoe files written by
`kamera make-model`: the model's family, every position's logits of a token sequence against
`kamera logits --all-positions` (the CLI's forward), and a chunk served behind another with a
full-rank patch against re-prefill.

  PYTHONPATH=build/python KAMERA_BIN=build/bin/kamera /usr/bin/python3 tests/python/test_families.py
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
TOKENS = [1, 17, 250, 3, 99, 42, 7, 300, 128, 64]


class Families(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check(self, arch):
        path = os.path.join(self.tmp.name, arch + ".gguf")
        subprocess.run([KAMERA, "make-model", "--arch", arch, "--preset", "tiny", "--seed", "2",
                        "-o", path], check=True, capture_output=True)
        out = subprocess.run([KAMERA, "logits", "-m", path, "--tokens",
                              ",".join(map(str, TOKENS)), "--all-positions", "-t", "1", "--json"],
                             check=True, capture_output=True, text=True).stdout
        ref = np.asarray(json.loads(out)["logits"], np.float32)
        model = kamera.Model(path)
        self.assertEqual(model.arch, arch)
        # the tiny qwen3vl presets add 2 deepstack slices after each embedding row
        self.assertEqual(model.input_dim, model.dim * (3 if arch.startswith("qwen3vl") else 1))
        ctx = kamera.Context(model, n_threads=1)
        got = ctx.sequence().eval(TOKENS, logits="all")
        scale = max(1.0, float(np.abs(ref).max()))
        self.assertLessEqual(float(np.abs(got - ref).max()), 1e-5 * scale)
        # b behind a: a full-rank patch answers as a re-prefill of [a, b]
        a, b = kamera.Chunk(model, TOKENS[:6]), kamera.Chunk(model, TOKENS[6:])
        q = [5, 6, 7]
        re = ctx.assemble([a, b], policy="reprefill").eval(q, logits="all")
        pa = ctx.assemble([a, b], policy="patch", rank="full").eval(q, logits="all")
        self.assertLessEqual(float(np.abs(pa - re).max()), 1e-4 * max(1.0, float(np.abs(re).max())))

    def test_qwen3(self):
        self.check("qwen3")

    def test_qwen3moe(self):
        self.check("qwen3moe")

    def test_qwen3vl(self):
        self.check("qwen3vl")

    def test_qwen3vlmoe(self):
        self.check("qwen3vlmoe")

    def test_gemma3_swa_full(self):
        """swa_full on gemma3 (window 8): a chat's second turn resumes at the end of the first on
        a pool bounded by the window (the default) and on every row, with the same logits."""
        path = os.path.join(self.tmp.name, "gemma3.gguf")
        subprocess.run([KAMERA, "make-model", "--arch", "gemma3", "--preset", "tiny", "--seed",
                        "2", "-o", path], check=True, capture_output=True)
        model = kamera.Model(path)
        turn1 = [(7 * i) % 250 + 2 for i in range(40)]
        reply, user = [11, 12, 13, 14, 15, 16], [21, 22, 23, 24, 25]
        got = {}
        for full in (False, True):
            ctx = kamera.Context(model, n_threads=1, kv_tokens=4096, swa_full=full)
            seq, _ = ctx.prompt_eval(turn1)
            seq.eval(reply, logits="none")
            seq.remember()
            seq2, got[full] = ctx.prompt_eval(turn1 + reply + user)
            self.assertEqual(seq2.report["tokens_reused"], len(turn1) + len(reply))
            self.assertEqual(seq2.report["tokens_computed"], len(user))
        scale = float(np.abs(got[True]).max())
        self.assertLessEqual(float(np.abs(got[False] - got[True]).max()), 1e-5 * scale)


if __name__ == "__main__":
    unittest.main()
