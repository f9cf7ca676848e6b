#!/usr/bin/python3
"""The Python binding on the committed mini-VL (models/minivl), against independent computations
through the same API: re-prefill against one forward of the whole sequence, a full-rank patch
against re-prefill, a window's query against an assembled sequence, views against copies.

  PYTHONPATH=build/python /usr/bin/python3 tests/python/test_binding.py
"""
import gc
import math
import os
import tempfile
import unittest

import numpy as np

import kamera

ROOT = os.environ.get("KAMERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def mean_kl(ref, arm):
    """KL(softmax(ref) || softmax(arm)) per row, averaged (nats, in float64)."""
    ref, arm = np.asarray(ref, np.float64), np.asarray(arm, np.float64)
    lp = ref - ref.max(-1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(-1, keepdims=True))
    lq = arm - arm.max(-1, keepdims=True)
    lq -= np.log(np.exp(lq).sum(-1, keepdims=True))
    return float(np.maximum((np.exp(lp) * (lp - lq)).sum(-1), 0).mean())


class Binding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = kamera.Model(os.path.join(ROOT, kamera.minivl.decoder_file))
        cls.vision = kamera.Vision(os.path.join(ROOT, kamera.minivl.vision_file))
        cls.stream = kamera.minivl.stream(index=5, n_frames=5)
        cls.frames = [cls.vision.encode(cls.model, f.rgb) for f in cls.stream]
        q = kamera.minivl.questions(cls.stream[:3])[0]
        cls.question = kamera.Chunk(cls.model, q.tokens)
        cls.question_ids = list(q.tokens)

    def setUp(self):
        self.ctx = kamera.Context(self.model)

    def test_model_and_errors(self):
        m = self.model
        self.assertEqual((m.arch, m.n_vocab, m.dim, m.n_layers), ("qwen2vl", 64, 64, 4))
        self.assertEqual(m.kv_channels, [("k", 32, True), ("v", 32, False)])
        words = kamera.minivl.words()
        self.assertEqual(m.detokenize([kamera.minivl.word_id("colour"), 3 + 1]).split()[0], "colour")
        self.assertEqual(words[m.bos], "<bos>")
        with self.assertRaises(kamera.Error) as e:
            kamera.Model(os.path.join(ROOT, "models/minivl/absent.gguf"))
        self.assertEqual((e.exception.code, e.exception.name), (7, "io"))
        self.assertIn("absent.gguf", str(e.exception))
        with self.assertRaises(kamera.Error) as e:
            kamera.Chunk(m, [64])
        self.assertEqual(e.exception.name, "invalid_argument")

    def test_chunks_and_kv_views(self):
        f0 = self.frames[0]
        self.assertEqual((f0.n_tokens, f0.extent, len(f0.id)), (4, 2, 32))
        self.assertEqual(self.vision.encode(self.model, self.stream[0].rgb).id, f0.id)
        self.assertNotEqual(self.frames[1].id, f0.id)
        rows = np.zeros((2, 64), np.float32)
        e = kamera.Chunk.from_embeddings(self.model, rows, layout=[[0, 0, 0], [0, 0, 5]])
        self.assertEqual(e.extent, 6)
        with self.assertRaises(kamera.Error) as err:
            f0.kv(0, 0)
        self.assertEqual(err.exception.name, "not_found")
        self.assertTrue(self.ctx.cache(f0))
        self.assertFalse(self.ctx.cache(f0))
        v = f0.kv(3, 1)
        self.assertEqual((v.shape, v.dtype, v.flags.writeable), ((4, 32), np.float32, False))
        self.assertTrue(np.shares_memory(v, f0.kv(3, 1)))  # a view of the stored KV, no copy
        with self.assertRaises(ValueError):
            v[0, 0] = 1.0
        chunk = self.vision.encode(self.model, self.stream[0].rgb)
        self.ctx.cache(chunk)
        view, copy = chunk.kv(0, 0), chunk.kv(0, 0).copy()
        del chunk
        gc.collect()
        np.testing.assert_array_equal(view, copy)  # the view keeps its chunk alive

    def serve(self, policy, rank=0, frames=None):
        seq = self.ctx.assemble(frames or self.frames[:3], policy=policy, rank=rank)
        return seq, seq.eval(self.question, logits="all")

    def test_policies_against_reprefill(self):
        direct = self.ctx.sequence()
        self.assertIsNone(direct.eval([self.model.bos], logits="none"))
        for f in self.frames[:3]:
            direct.eval(f, logits="none")
        want = direct.eval(self.question, logits="all")
        seq, ref = self.serve("reprefill")
        self.assertEqual(seq.report["forwards"], 3)
        self.assertFalse(ref.flags.writeable)
        self.assertEqual(ref.shape, (len(self.question), 64))
        np.testing.assert_array_equal(ref, want)
        _, blind = self.serve("blind")
        seq, full = self.serve("patch", rank="full")
        self.assertEqual([s["source"] for s in seq.report["segments"]],
                         ["canonical", "patch_formed", "patch_formed"])
        _, rank1 = self.serve("patch", rank=1)
        kl_blind, kl_full, kl_1 = mean_kl(ref, blind), mean_kl(ref, full), mean_kl(ref, rank1)
        print(f"KL to re-prefill: blind {kl_blind:.3e}, rank 1 {kl_1:.3e}, full {kl_full:.3e}")
        self.assertGreater(kl_blind, 1e-6)
        self.assertLess(kl_full, 1e-8)
        self.assertLess(kl_1, kl_blind)

    def test_prompt_budget(self):
        """prompt_eval's repair budget reaches kamera_prompt_eval_budget: refused by name outside
        [0, 1] and above 0 with a policy that has no repair; a budget in range evaluates (what it
        recomputes is tested in C++: RepairBudget.*, ServerRepair.*)."""
        ids = [self.model.bos] + self.question_ids
        with self.assertRaises(kamera.Error) as e:
            self.ctx.prompt_eval(ids, reuse_budget=1.5)
        self.assertEqual(e.exception.name, "invalid_argument")
        self.assertIn("reuse_budget", str(e.exception))
        with self.assertRaises(kamera.Error) as e:
            self.ctx.prompt_eval(ids, reuse="keep", reuse_budget=0.5)
        self.assertIn("keep", str(e.exception))
        seq, last = self.ctx.prompt_eval(ids, reuse_budget=1.0)
        _, ref = kamera.Context(self.model).prompt_eval(ids, reuse="reprefill")
        np.testing.assert_allclose(last, ref, atol=1e-5)
        self.assertGreater(seq.n_tokens, 0)

    def test_kv_type(self):
        with self.assertRaises(ValueError):
            kamera.Context(self.model, kv_type="f8")
        self.ctx = kamera.Context(self.model, kv_type="bf16")
        _, ref = self.serve("reprefill")
        _, blind = self.serve("blind")
        _, full = self.serve("patch", rank="full")
        kl_blind, kl_full = mean_kl(ref, blind), mean_kl(ref, full)
        print(f"bf16 KV, KL to a bf16 re-prefill: blind {kl_blind:.3e}, full rank {kl_full:.3e}")
        self.assertLess(kl_full, 0.05 * kl_blind)  # rounding once to bf16, not the deficit
        chunk = self.vision.encode(self.model, self.stream[4].rgb)
        self.ctx.cache(chunk)
        with self.assertRaises(kamera.Error) as e:
            chunk.kv(0, 0)  # stored as bf16: no float32 view
        self.assertEqual(e.exception.name, "unsupported")

    def test_window(self):
        w = kamera.Window(self.ctx, rank=2)
        for f in self.frames[:4]:
            w.admit_back(f)
        w.evict_front()
        self.assertEqual([s["position"] for s in w.slots], [1, 3, 5])
        self.assertEqual(w.stale_slots(), [0, 1, 2])
        for i in range(3):
            w.refresh(i)
        self.assertEqual(w.stale_slots(), [])
        _, want = self.serve("patch", rank=2, frames=self.frames[1:4])
        np.testing.assert_allclose(w.query(self.question, logits="all"), want, rtol=0, atol=1e-5)
        w.recall(self.frames[0], at=0, mode="fresh")
        self.assertEqual((len(w), w.slots[0]["id"]), (4, self.frames[0].id))
        w.check()
        fork = w.fork()
        fork.evict(3)
        self.assertEqual((len(w), len(fork)), (4, 3))
        np.testing.assert_array_equal(w.query(self.question), w.fork().query(self.question))
        with self.assertRaises(kamera.Error) as e:
            w.evict(9)
        self.assertEqual(e.exception.code, 1)
        with self.assertRaises(kamera.Error) as e:
            w.recall("0" * 32)
        self.assertEqual(e.exception.name, "not_found")
        with self.assertRaises(ValueError):
            w.reorder([0, 1, 2, 3], mode="sideways")

    def test_store_and_sampler(self):
        with tempfile.TemporaryDirectory() as d:
            a = kamera.Context(self.model, disk_dir=d)
            a.cache(self.frames[4])
            b = kamera.Context(self.model, disk_dir=d)
            chunk = self.vision.encode(self.model, self.stream[4].rgb)
            self.assertFalse(b.cache(chunk))  # found on disk
            s = b.store_stats()
            self.assertEqual((s["tier_canonical_hits"], s["tiers"][0]["name"]), (1, "disk"))
            np.testing.assert_array_equal(chunk.kv(2, 0), self.frames[4].kv(2, 0))
        row = np.array([0.5, 3.0, -1.0, 2.9], np.float32)
        self.assertEqual(kamera.Sampler().sample(row), 1)
        draws = [kamera.Sampler(temperature=1.0, top_k=2, seed=9).sample(row) for _ in range(3)]
        self.assertEqual(len(set(draws)), 1)  # one seed, one draw
        p = self.ctx.pool_stats()
        self.assertEqual(p["sequences"], 0)
        self.assertFalse(math.isnan(sum(p.values())))


if __name__ == "__main__":
    unittest.main(verbosity=2)
