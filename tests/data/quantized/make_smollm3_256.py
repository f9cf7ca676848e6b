#!/usr/bin/env python3
"""Writes smollm3-256.gguf: the layer_kinds smollm3 generator (../layer_kinds/make_fixtures.py)
with rows of 256 values, so llama-quantize's Q4_K_M really uses Q4_K and Q6_K (a K-quant needs
ne[0] % 256 == 0; the 32- and 64-wide fixtures fall back to Q5_0 / Q8_0). 2 layers, residual
256, 4 query heads of 64 on 2 KV heads, FFN 256, 128 token ids, seed 13.

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_smollm3_256.py OUT.gguf
"""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ beside the committed generator
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "layer_kinds"))
import make_fixtures as mf  # noqa: E402

mf.DIM, mf.HEADS, mf.KV_HEADS, mf.HEAD, mf.FFN = 256, 4, 2, 64, 256


def smollm3_256(path, seed, layers):
    w = mf.gguf.GGUFWriter(path, "smollm3")
    mf.common(w, "smollm3", layers, 1e-6)
    w.add_rope_freq_base(5000000.0)
    w.add_rope_dimension_count(mf.HEAD)
    w.add_key_length(mf.HEAD)
    w.add_value_length(mf.HEAD)
    mf.weights(np.random.default_rng(seed), w, layers, gemma=False)
    mf.finish(w)


if __name__ == "__main__":
    smollm3_256(sys.argv[1], 13, 2)
