#!/usr/bin/env python3
"""Writes the tiny smollm3 and gemma3 fixtures with llama.cpp's own gguf-py, the keys and tensor
names its convert_hf_to_gguf.py writes for each family, and seeded random weights (README.md).

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 tests/data/layer_kinds/make_fixtures.py \
        tests/data/layer_kinds
"""
import sys

import numpy as np
import gguf

DIM, HEADS, KV_HEADS, HEAD, FFN, VOCAB, CTX = 32, 2, 1, 16, 64, 128, 512


def common(w, arch, layers, eps):
    # what TextModel.set_gguf_parameters and the family's class write
    w.add_context_length(CTX)
    w.add_embedding_length(DIM)
    w.add_block_count(layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(eps)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(VOCAB)
    w.add_tokenizer_model("none")


def weights(rng, w, layers, gemma):
    def mat(name, rows, cols):  # a Linear (rows out, cols in), as PyTorch holds it
        w.add_tensor(name, (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32))

    def norm(name, n):  # Gemma's converter stores 1 + w; random w around 0 either way
        v = 1.0 + 0.1 * rng.standard_normal(n)
        w.add_tensor(name, v.astype(np.float32))

    w.add_tensor("token_embd.weight", (0.5 * rng.standard_normal((VOCAB, DIM))).astype(np.float32))
    norm("output_norm.weight", DIM)
    for i in range(layers):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", DIM)
        mat(p + "attn_q.weight", HEADS * HEAD, DIM)
        mat(p + "attn_k.weight", KV_HEADS * HEAD, DIM)
        mat(p + "attn_v.weight", KV_HEADS * HEAD, DIM)
        mat(p + "attn_output.weight", DIM, HEADS * HEAD)
        if gemma:
            norm(p + "attn_q_norm.weight", HEAD)
            norm(p + "attn_k_norm.weight", HEAD)
            norm(p + "post_attention_norm.weight", DIM)
            norm(p + "post_ffw_norm.weight", DIM)
        norm(p + "ffn_norm.weight", DIM)
        mat(p + "ffn_gate.weight", FFN, DIM)
        mat(p + "ffn_up.weight", FFN, DIM)
        mat(p + "ffn_down.weight", DIM, FFN)


def smollm3(path, seed):
    # LlamaModel.set_gguf_parameters: vocab_size, rope.dimension_count; no key for no_rope_layers
    w = gguf.GGUFWriter(path, "smollm3")
    common(w, "smollm3", 4, 1e-6)
    w.add_rope_freq_base(5000000.0)
    w.add_rope_dimension_count(HEAD)
    w.add_key_length(HEAD)  # head_dim x heads != hidden: the base class writes both
    w.add_value_length(HEAD)
    weights(np.random.default_rng(seed), w, 4, gemma=False)
    finish(w)


def gemma3(path, seed, window):
    # Gemma3Model.set_gguf_parameters: key/value length, rope.freq_base of the global layers,
    # sliding_window (no pattern key: llama.cpp's default period 6; no local rope base: 10000)
    w = gguf.GGUFWriter(path, "gemma3")
    common(w, "gemma3", 6, 1e-6)
    w.add_key_length(HEAD)
    w.add_value_length(HEAD)
    w.add_rope_freq_base(1000000.0)
    w.add_sliding_window(window)
    weights(np.random.default_rng(seed), w, 6, gemma=True)
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    out = sys.argv[1]
    smollm3(f"{out}/smollm3-tiny.gguf", 11)
    gemma3(f"{out}/gemma3-tiny.gguf", 12, 4)
