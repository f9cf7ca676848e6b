#!/usr/bin/env python3
"""Writes gpt-oss-f32.gguf: the gpt-oss fixture generator (../gpt_oss/make_gpt_oss_fixture.py,
llama.cpp's converter layout: 4 layers, residual 64, 4 experts of 64 with 2 used, sinks, YaRN)
with its expert matrices written as f32 instead of MXFP4, so that llama-quantize's MXFP4_MOE
has something to quantize: each expert matrix is seeded normal values / sqrt(columns).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_gpt_oss_f32.py OUT.gguf
"""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ beside the committed generator
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpt_oss"))
import make_gpt_oss_fixture as gf  # noqa: E402

experts_rng = np.random.default_rng(4949)


def add_f32_experts(w, name, blocks, scales):
    experts, rows, cols = blocks.shape[0], blocks.shape[1], blocks.shape[2] * 32
    gf.f32(name, experts_rng.standard_normal((experts, rows, cols)) / np.sqrt(cols), w)


if __name__ == "__main__":
    gf.add_mxfp4 = add_f32_experts
    gf.main(sys.argv[1])
