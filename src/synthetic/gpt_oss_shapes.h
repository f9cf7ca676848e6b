// make-model's gpt-oss shapes (the loader's side is model/gpt_oss.h, whose header lists the keys
// and tensors): q/k/v/o biases, attention sinks, the FFN norm as post_attention_norm, a biased
// router over experts with biases whose matrices are MXFP4, SWA/full alternation, YaRN.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"

namespace kamera {

class GgufWriter;

// Presets: "tiny" (64 wide, 4 heads of 32 (q width 128 != residual, as gpt-oss), 2 KV heads,
// 2 layers (0 sliding-window of 8, 1 full), 4 experts of 64 with 2 used, vocabulary 512, YaRN 32
// over 256 of 8192) and "gpt-oss-20b" (openai/gpt-oss-20b's config.json: 24 layers, hidden 2880,
// 64 query heads and 8 KV heads of 64, 32 experts of 2880 with 4 used, vocabulary 201088,
// sliding window 128 on every other layer, rope base 150000, YaRN 32 over 4096 of 131072) and
// "gpt-oss-20b-2l" (those shapes with 2 of the 24 layers: one sliding-window, one full).
// False for another name.
bool gpt_oss_preset(const std::string& preset, ModelConfig& c);

// What follows the shape after --dims: the layer kinds (period 2) and the query scale.
void finish_gpt_oss(ModelConfig& c);

// expert counts, attention.sliding_window and the YaRN keys (nothing for another arch).
void write_gpt_oss_keys(GgufWriter& w, const ModelConfig& c);

// Weights beyond the llama count: sinks, the o bias, router and expert biases.
int64_t gpt_oss_extra_parameters(const ModelConfig& c);

}  // namespace kamera
