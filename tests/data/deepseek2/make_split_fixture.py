#!/usr/bin/env python3
# Writes split_tiny.gguf: a tiny DeepSeek-V3-style decoder (MLA with q low-rank, one dense and one
# MoE layer with sigmoid scores, groups and the selection bias, YaRN) laid out as llama.cpp's
# convert_hf_to_gguf.py (d32676d, conversion/deepseek.py DeepseekV2Model) writes it today: one KV
# head, key_length = kv_lora_rank + qk_rope, value_length = kv_lora_rank, the per-head sizes in
# key_length_mla / value_length_mla, and kv_b_proj split per head into attn_k_b (transposed) and
# attn_v_b. Weights are seeded numpy normals in Hugging Face's (out, in) layout, renamed and
# reshaped as the converter does, written in f32 by llama.cpp's own gguf-py.
#
#   PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_split_fixture.py split_tiny.gguf
import sys

import numpy as np
import gguf

SEED = 49
HP = dict(vocab=300, dim=32, layers=2, heads=4, ffn=64, ctx=256, q_lora=32, kv_lora=32,
          nope=16, rope=8, v=16, experts=4, used=2, shared=1, expert_ffn=16, groups=2,
          groups_used=1, scale=2.5, yarn=4.0, yarn_orig=64, mscale_all_dim=0.707, eps=1e-6,
          theta=10000.0)

rng = np.random.default_rng(SEED)


def linear(out_features, in_features):  # Hugging Face Linear.weight: (out, in)
    return (rng.standard_normal((out_features, in_features)) / np.sqrt(in_features)).astype(
        np.float32)


def norm(n):
    return (1.0 + 0.1 * rng.uniform(-1, 1, n)).astype(np.float32)


def vocab(w, n):
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(6)  # BYTE
    while len(tokens) < n:
        tokens.append(f"\u2581w{len(tokens)}")
        scores.append(-float(len(tokens)))
        types.append(1)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def hparams(w, h):
    # TextModel.set_gguf_parameters, then DeepseekV2Model's (num_key_value_heads set to 1)
    w.add_block_count(h["layers"])
    w.add_context_length(h["ctx"])
    w.add_embedding_length(h["dim"])
    w.add_feed_forward_length(h["ffn"])
    w.add_head_count(h["heads"])
    w.add_head_count_kv(1)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(h["yarn"])
    w.add_rope_scaling_orig_ctx_len(h["yarn_orig"])
    w.add_rope_scaling_yarn_beta_fast(32.0)
    w.add_rope_scaling_yarn_beta_slow(1.0)
    w.add_rope_freq_base(h["theta"])
    w.add_layer_norm_rms_eps(h["eps"])
    w.add_expert_count(h["experts"])
    w.add_expert_used_count(h["used"])
    w.add_expert_group_count(h["groups"])
    w.add_expert_group_used_count(h["groups_used"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_leading_dense_block_count(1)
    w.add_vocab_size(h["vocab"])
    w.add_q_lora_rank(h["q_lora"])
    w.add_kv_lora_rank(h["kv_lora"])
    w.add_key_length(h["kv_lora"] + h["rope"])
    w.add_value_length(h["kv_lora"])
    w.add_key_length_mla(h["nope"] + h["rope"])
    w.add_value_length_mla(h["v"])
    w.add_expert_feed_forward_length(h["expert_ffn"])
    w.add_expert_shared_count(h["shared"])
    w.add_expert_weights_scale(h["scale"])
    w.add_expert_weights_norm(True)
    w.add_rope_dimension_count(h["rope"])
    w.add_rope_scaling_yarn_log_mul(0.1 * h["mscale_all_dim"])


def attention(w, p, h):
    H, L, nope, R, v = h["heads"], h["kv_lora"], h["nope"], h["rope"], h["v"]
    w.add_tensor(p + "attn_q_a.weight", linear(h["q_lora"], h["dim"]))
    w.add_tensor(p + "attn_q_a_norm.weight", norm(h["q_lora"]))
    w.add_tensor(p + "attn_q_b.weight", linear(H * (nope + R), h["q_lora"]))
    w.add_tensor(p + "attn_kv_a_mqa.weight", linear(L + R, h["dim"]))
    w.add_tensor(p + "attn_kv_a_norm.weight", norm(L))
    kv_b = linear(H * (nope + v), L)  # kv_b_proj: per head nope rows, then v rows
    per_head = kv_b.reshape(H, nope + v, L)
    k_b = np.ascontiguousarray(per_head[:, :nope, :].transpose(0, 2, 1))  # (H, L, nope)
    v_b = np.ascontiguousarray(per_head[:, nope:, :])  # (H, v, L)
    w.add_tensor(p + "attn_k_b.weight", k_b)
    w.add_tensor(p + "attn_v_b.weight", v_b)
    w.add_tensor(p + "attn_output.weight", linear(h["dim"], H * v))


def ffn(w, p, h, moe):
    d = h["dim"]
    if not moe:
        w.add_tensor(p + "ffn_gate.weight", linear(h["ffn"], d))
        w.add_tensor(p + "ffn_up.weight", linear(h["ffn"], d))
        w.add_tensor(p + "ffn_down.weight", linear(d, h["ffn"]))
        return
    E, F, S = h["experts"], h["expert_ffn"], h["expert_ffn"] * h["shared"]
    w.add_tensor(p + "ffn_gate_inp.weight", linear(E, d))
    w.add_tensor(p + "exp_probs_b.bias", rng.uniform(0, 0.5, E).astype(np.float32))
    for name, (o, i) in (("down", (d, F)), ("gate", (F, d)), ("up", (F, d))):
        w.add_tensor(p + f"ffn_{name}_exps.weight", np.stack([linear(o, i) for _ in range(E)]))
    w.add_tensor(p + "ffn_gate_shexp.weight", linear(S, d))
    w.add_tensor(p + "ffn_up_shexp.weight", linear(S, d))
    w.add_tensor(p + "ffn_down_shexp.weight", linear(d, S))


def main(path):
    h = HP
    w = gguf.GGUFWriter(path, "deepseek2")
    w.add_name("kamera-fixture-deepseek2-split")
    hparams(w, h)
    vocab(w, h["vocab"])
    w.add_tensor("token_embd.weight",
                 (rng.standard_normal((h["vocab"], h["dim"])) / np.sqrt(h["dim"])).astype(
                     np.float32))
    w.add_tensor("output_norm.weight", norm(h["dim"]))
    w.add_tensor("output.weight", linear(h["vocab"], h["dim"]))
    for i in range(h["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(h["dim"]))
        attention(w, p, h)
        w.add_tensor(p + "ffn_norm.weight", norm(h["dim"]))
        ffn(w, p, h, moe=i >= 1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1])
