#!/usr/bin/python3
"""The issue's "done when" check in Python, against the public API only: load stories260K, cache
a chunk, reuse it at another position with a rank-8 patch, and reproduce `kamera reuse-bench`'s
per-item KL of the patch arm and of blind reuse on the first item of
data/reuse-stories260K.jsonl (KL(p_reprefill || p_arm) averaged over the query's positions,
docs/METHOD.md). Exits 77 (skipped) when the model file is absent.

  PYTHONPATH=build/python KAMERA_BIN=build/bin/kamera \
      KAMERA_STORIES=../shared/models/stories260K/stories260K.gguf tests/python/test_stories.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import kamera

ROOT = os.environ.get("KAMERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.environ.get("KAMERA_STORIES",
                       os.path.join(ROOT, "..", "shared", "models", "stories260K", "stories260K.gguf"))
KAMERA = os.environ.get("KAMERA_BIN", os.path.join(ROOT, "build", "bin", "kamera"))
RANK = 8


def mean_kl(ref, arm):
    ref, arm = np.asarray(ref, np.float64), np.asarray(arm, np.float64)
    lp = ref - ref.max(-1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(-1, keepdims=True))
    lq = arm - arm.max(-1, keepdims=True)
    lq -= np.log(np.exp(lq).sum(-1, keepdims=True))
    return float(np.maximum((np.exp(lp) * (lp - lq)).sum(-1), 0).mean())


def bench(item):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "item.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps(item) + "\n")
        out = subprocess.run([KAMERA, "reuse-bench", "-m", MODEL, "--items", path, "--ranks",
                              str(RANK), "--no-deep-half", "--quiet", "--json", "-t", "2"],
                             check=True, capture_output=True, text=True).stdout
    arms = json.loads(out)["arms"]
    kl = {(a["name"], a["rank"]): a["item_kl"][0] for a in arms}
    return kl[("patch", RANK)], kl[("blind", None)]


class Stories(unittest.TestCase):
    def test_patch_and_blind_match_reuse_bench(self):
        with open(os.path.join(ROOT, "data", "reuse-stories260K.jsonl")) as f:
            item = json.loads(f.readline())
        model = kamera.Model(MODEL)
        ctx = kamera.Context(model, n_threads=2)
        a, b, q = (kamera.Chunk(model, model.tokenize(item[k], raw=True))
                   for k in ("antecedent", "chunk", "query"))
        self.assertTrue(ctx.cache(b))  # KV(B | BOS) at position 1, reused at 1 + |A| below
        logits = {p: ctx.assemble([a, b], policy=p, rank=RANK).eval(q, logits="all")
                  for p in ("reprefill", "patch", "blind")}
        self.assertEqual(logits["patch"].shape, (len(q), model.n_vocab))
        want_patch, want_blind = bench(item)
        got_patch = mean_kl(logits["reprefill"], logits["patch"])
        got_blind = mean_kl(logits["reprefill"], logits["blind"])
        print(f"patch rank {RANK}: {got_patch:.9e} vs reuse-bench {want_patch:.9e}; "
              f"blind {got_blind:.9e} vs {want_blind:.9e}")
        self.assertAlmostEqual(got_patch / want_patch, 1.0, delta=1e-6)
        self.assertAlmostEqual(got_blind / want_blind, 1.0, delta=1e-6)
        self.assertLess(got_patch, got_blind)

    def test_tokenizer_round_trip(self):
        model = kamera.Model(MODEL)
        text = "Once upon a time, there was a little girl named Lily."
        ids = model.tokenize(text, add_bos=True)
        self.assertEqual(ids[0], model.bos)
        self.assertEqual(model.detokenize(ids), text)

    def test_llama2c_checkpoint_with_tokenizer(self):
        d = os.path.dirname(MODEL)
        bin_model = kamera.Model(os.path.join(d, "stories260K.bin"),
                                 tokenizer=os.path.join(d, "tok512.bin"))
        gguf = kamera.Model(MODEL)
        self.assertTrue(bin_model.format.startswith("llama2c"))
        self.assertEqual((bin_model.n_vocab, bin_model.dim), (gguf.n_vocab, gguf.dim))
        text = " The cat sat on the mat."
        self.assertEqual(bin_model.tokenize(text, raw=True), gguf.tokenize(text, raw=True))
        with self.assertRaises(kamera.Error) as e:
            kamera.Model(os.path.join(d, "stories260K.bin"), tokenizer=os.path.join(d, "nope.bin"))
        self.assertIn("nope.bin", str(e.exception))


if __name__ == "__main__":
    if not os.path.exists(MODEL):
        print(f"skipped: {MODEL} is absent (../shared/models is provided in CI)")
        sys.exit(77)
    unittest.main(verbosity=2)
