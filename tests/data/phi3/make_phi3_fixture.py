#!/usr/bin/env python3
# A tiny Phi-4-mini-shaped phi3 decoder as llama.cpp d32676d's conversion/phi.py (Phi3MiniModel)
# writes it: fused attn_qkv and ffn_up (gate then up), partial rotary (rope dims 12 of head 16),
# LongRoPE factors as global tensors rope_factors_{long,short}.weight, rope.scaling.attn_factor,
# rope.scaling.original_context_length, sliding_window 0. Seeded numpy weights, f32.
#   PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_phi3_fixture.py phi3_tiny.gguf
import math, sys
import numpy as np
import gguf

H = dict(vocab=300, dim=64, layers=2, heads=4, kv_heads=2, ffn=128, ctx=8192, orig=4096,
         partial=0.75, theta=10000.0, eps=1e-5)
rng = np.random.default_rng(34)

def linear(o, i):
    return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

def norm(n):
    return (1.0 + 0.1 * rng.uniform(-1, 1, n)).astype(np.float32)

def main(path):
    h = H
    hd = h["dim"] // h["heads"]
    rope_dims = int(h["partial"] * h["dim"]) // h["heads"]
    w = gguf.GGUFWriter(path, "phi3")
    w.add_name("kamera-fixture-phi3")
    w.add_context_length(h["ctx"])
    w.add_rope_scaling_orig_ctx_len(h["orig"])
    w.add_embedding_length(h["dim"])
    w.add_feed_forward_length(h["ffn"])
    w.add_block_count(h["layers"])
    w.add_head_count(h["heads"])
    w.add_head_count_kv(h["kv_heads"])
    w.add_layer_norm_rms_eps(h["eps"])
    w.add_rope_dimension_count(rope_dims)
    w.add_rope_freq_base(h["theta"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_sliding_window(0)
    scale = h["ctx"] / h["orig"]
    w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(h["orig"])))
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    special = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
    tokens += [f"\u2581w{i}" for i in range(len(tokens), h["vocab"] - len(special))] + special
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(259, h["vocab"])])
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (h["vocab"] - 259 - len(special)) + [3] * len(special))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_tensor("token_embd.weight", (rng.standard_normal((h["vocab"], h["dim"])) / 8).astype(np.float32))
    w.add_tensor("output_norm.weight", norm(h["dim"]))
    w.add_tensor("output.weight", linear(h["vocab"], h["dim"]))
    w.add_tensor("rope_factors_long.weight", rng.uniform(1.0, 8.0, rope_dims // 2).astype(np.float32))
    w.add_tensor("rope_factors_short.weight", rng.uniform(1.0, 1.5, rope_dims // 2).astype(np.float32))
    q, kv = h["heads"] * hd, h["kv_heads"] * hd
    for i in range(h["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(h["dim"]))
        w.add_tensor(p + "attn_qkv.weight", linear(q + 2 * kv, h["dim"]))   # qkv_proj: q, k, v rows
        w.add_tensor(p + "attn_output.weight", linear(h["dim"], q))
        w.add_tensor(p + "ffn_norm.weight", norm(h["dim"]))
        w.add_tensor(p + "ffn_up.weight", linear(2 * h["ffn"], h["dim"]))  # gate_up_proj: gate, up rows
        w.add_tensor(p + "ffn_down.weight", linear(h["dim"], h["ffn"]))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

if __name__ == "__main__":
    main(sys.argv[1])
