// Qwen3 and Qwen3-MoE (GGUF architectures qwen3, qwen3moe) beyond a GQA decoder, as llama.cpp
// reads and runs them (checked at unslothai/llama.cpp d32676d, src/models/qwen3*.cpp):
//
//   attention: q = W_q x, k = W_k x (no biases), then RMSNorm of every head of q and of k with the
//     per-layer weights blk.N.attn_q_norm / attn_k_norm (head_dim values each, shared by all
//     heads, the model's rms eps), then the NeoX rope on all head_dim channels. The head width is
//     {arch}.attention.key_length (= value_length), which may differ from embedding_length /
//     head_count (Qwen3-0.6B: 16 x 128 = 2048 on a 1024 residual). Scores 1 / sqrt(head_dim).
//   qwen3moe's FFN (every layer): p = softmax(W_router x) over {arch}.expert_count experts, the
//     {arch}.expert_used_count largest, their weights divided by their sum (llama.cpp always
//     normalizes: Hugging Face's norm_topk_prob, true in every released Qwen3-MoE); experts of
//     width {arch}.expert_feed_forward_length (absent: feed_forward_length / expert_used_count);
//     tensors blk.N.ffn_gate_inp, ffn_{gate,up,down}_exps (model/moe.h). No shared experts.
//
// Because the norms act on each head before the rotation, the key kamera caches (normed, not yet
// rotated) is still a function of the token's content alone: relocation stays exact.
//
// Refused with a message: qwen3moe with expert_shared_count > 0, expert_weights_norm = false or
// expert_weights_scale other than 1 (llama.cpp ignores all three for qwen3moe, so such a file
// would mean something else to each engine).
#pragma once

#include "core/status.h"
#include "model/config.h"

namespace kamera {

class GgufFile;

// The MoE keys of a qwen3moe file into c.moe (after the layer count and FFN width are read).
Status read_qwen3moe_hparams(const GgufFile& f, ModelConfig& c);

}  // namespace kamera
