// make-model's deepseek2 shapes (the loader's side is model/deepseek2.h, whose header lists the
// keys and tensors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace kamera {

class GgufWriter;

// The deepseek2 keys llama.cpp reads for every file (MoE or dense), and the rope scaling.
void write_deepseek2_keys(GgufWriter& w, const ModelConfig& c);

// make-model shapes: "tiny-moe" (tiny MLA plus 1 dense and 2 MoE layers of 8 experts, 2 used,
// 1 shared, YaRN factor 4 on 256), "lite" (DeepSeek-V2-Lite as released), "lite-attn" (V2-Lite's
// attention with one dense FFN of width 1408 per layer), "kimi-vl-tiny" (tiny MLA plus 1 dense
// and 2 MoE layers of 8 experts with Kimi-VL's routing: sigmoid scores, the selection bias, 2
// used, 2 shared, normalized, x 2.446; rope theta 8e5; it keeps the tiny shape's q low-rank,
// since llama.cpp infers "no q low-rank" from 27 layers only), "kimi-vl-a3b" (Kimi-VL-A3B's
// decoder as released). False for another name.
bool deepseek2_preset(const std::string& preset, ModelConfig& c);

// --dims keys: experts, experts_used, shared_experts, expert_ffn, dense_lead, moe_norm, moe_scale,
// sigmoid (0/1: sigmoid expert scores), sel_bias (0/1: exp_probs_b), groups, groups_used,
// yarn (the factor; 1 turns YaRN off), yarn_orig, yarn_log_mul. False for another key.
bool apply_deepseek2_dim(ModelConfig& c, const std::string& key, double value);

// Shapes kamera runs that llama.cpp refuses, appended to `out`.
void deepseek2_llama_cpp_notes(const ModelConfig& c, std::vector<std::string>& out);

// Weights of the MoE layers beyond the dense FFN each would otherwise hold.
int64_t moe_extra_parameters(const ModelConfig& c);

}  // namespace kamera
