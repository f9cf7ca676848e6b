#!/usr/bin/env python3
"""A tiny gpt-oss decoder as llama.cpp d32676d's conversion/gpt_oss.py (GptOssModel) writes
gpt-oss-20b: the TextModel keys plus sliding_window and expert_feed_forward_length, YaRN rope
scaling (factor 32 over 4096, beta_fast 32, beta_slow 1), q/k/v/o biases, attn_sinks, the FFN's
norm as post_attention_norm, a biased router and biased experts whose matrices are MXFP4, made
the converter's way from Hugging Face's *_blocks / *_scales (GptOssModel.repack_mxfp4 and
transform_nibble_layout, ported to numpy). Seeded numpy weights, everything else f32.

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_gpt_oss_fixture.py gpt_oss_tiny.gguf
"""
import sys

import numpy as np
import gguf

H = dict(vocab=256, dim=64, layers=4, heads=4, kv_heads=2, head=32, experts=4, used=2, ffn=64,
         ctx=131072, orig=4096, factor=32.0, theta=150000.0, eps=1e-5, window=4)
rng = np.random.default_rng(49)
FP4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def hf_mxfp4(experts, rows, cols):
    """Hugging Face's storage: blocks [E, rows, cols/32, 16] (value 2j in the low nibble of byte
    j, 2j + 1 in the high one), scales [E, rows, cols/32] (E8M0, bias 127)."""
    blocks = rng.integers(0, 256, (experts, rows, cols // 32, 16), dtype=np.uint8)
    scales = rng.integers(121, 125, (experts, rows, cols // 32), dtype=np.uint8)
    return blocks, scales


def hf_dequant(blocks, scales):
    lo, hi = FP4[blocks & 15], FP4[blocks >> 4]
    vals = np.stack([lo, hi], axis=-1).reshape(*blocks.shape[:-1], 32)
    return vals * np.exp2(scales.astype(np.float32) - 127)[..., None]


def transform_nibble_layout(t):  # conversion/gpt_oss.py, on numpy uint8 arrays
    t = ((t & 0x0F) << 4) | ((t & 0xF0) >> 4)
    a, b = np.split(t, 2, axis=-1)
    a = np.stack(((a & 0xF0).reshape(-1), (a << 4).reshape(-1)), axis=1).reshape(t.shape)
    b = np.stack(((b >> 4).reshape(-1), (b & 0x0F).reshape(-1)), axis=1).reshape(t.shape)
    out = a | b
    return ((out & 0xF0) >> 4) | ((out & 0x0F) << 4)


def add_mxfp4(w, name, blocks, scales):  # GptOssModel.repack_mxfp4
    data = np.concatenate((scales[..., None], transform_nibble_layout(blocks)), axis=-1)
    data = data.reshape(data.shape[0], data.shape[1], -1)
    ggml = gguf.quants.dequantize(data, gguf.GGMLQuantizationType.MXFP4)
    assert np.array_equal(ggml, hf_dequant(blocks, scales).reshape(ggml.shape)), name
    w.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType.MXFP4)


def f32(name, a, w):
    w.add_tensor(name, np.asarray(a, dtype=np.float32))


def main(path):
    h = H
    d, q, kv, E, F = h["dim"], h["heads"] * h["head"], h["kv_heads"] * h["head"], h["experts"], h["ffn"]
    w = gguf.GGUFWriter(path, "gpt-oss")
    w.add_name("kamera-fixture-gpt-oss")
    # TextModel.set_gguf_parameters
    w.add_block_count(h["layers"])
    w.add_context_length(h["ctx"])
    w.add_embedding_length(d)
    w.add_feed_forward_length(F)
    w.add_head_count(h["heads"])
    w.add_head_count_kv(h["kv_heads"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(h["factor"])
    w.add_rope_scaling_orig_ctx_len(h["orig"])
    w.add_rope_scaling_yarn_beta_fast(32.0)
    w.add_rope_scaling_yarn_beta_slow(1.0)
    w.add_rope_freq_base(h["theta"])
    w.add_layer_norm_rms_eps(h["eps"])
    w.add_expert_count(E)
    w.add_expert_used_count(h["used"])
    w.add_key_length(h["head"])
    w.add_value_length(h["head"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    # GptOssModel.set_gguf_parameters
    w.add_sliding_window(h["window"])
    w.add_expert_feed_forward_length(F)
    w.add_vocab_size(h["vocab"])
    w.add_tokenizer_model("none")

    def mat(rows, cols):
        return rng.standard_normal((rows, cols)) / np.sqrt(cols)

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    f32("token_embd.weight", 0.5 * rng.standard_normal((h["vocab"], d)), w)
    f32("output_norm.weight", norm(d), w)
    f32("output.weight", mat(h["vocab"], d), w)
    for i in range(h["layers"]):
        p = f"blk.{i}."
        f32(p + "attn_norm.weight", norm(d), w)
        f32(p + "attn_q.weight", mat(q, d), w)
        f32(p + "attn_q.bias", 0.2 * rng.standard_normal(q), w)
        f32(p + "attn_k.weight", mat(kv, d), w)
        f32(p + "attn_k.bias", 0.2 * rng.standard_normal(kv), w)
        f32(p + "attn_v.weight", mat(kv, d), w)
        f32(p + "attn_v.bias", 0.2 * rng.standard_normal(kv), w)
        f32(p + "attn_output.weight", mat(d, q), w)
        f32(p + "attn_output.bias", 0.2 * rng.standard_normal(d), w)
        f32(p + "attn_sinks.weight", rng.uniform(-1, 3, h["heads"]), w)
        f32(p + "post_attention_norm.weight", norm(d), w)
        f32(p + "ffn_gate_inp.weight", mat(E, d), w)
        f32(p + "ffn_gate_inp.bias", 0.5 * rng.standard_normal(E), w)
        # gate_up_proj split into its even (gate) and odd (up) rows, as the converter does
        gate_up = hf_mxfp4(E, 2 * F, d)
        add_mxfp4(w, p + "ffn_gate_exps.weight", gate_up[0][:, ::2], gate_up[1][:, ::2])
        add_mxfp4(w, p + "ffn_up_exps.weight", gate_up[0][:, 1::2], gate_up[1][:, 1::2])
        add_mxfp4(w, p + "ffn_down_exps.weight", *hf_mxfp4(E, d, F))
        # large gate biases push some gates past the clamp at 7
        f32(p + "ffn_gate_exps.bias", 3.0 * rng.standard_normal((E, F)), w)
        f32(p + "ffn_up_exps.bias", 3.0 * rng.standard_normal((E, F)), w)
        f32(p + "ffn_down_exps.bias", 0.2 * rng.standard_normal((E, d)), w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1])
