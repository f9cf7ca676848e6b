// make-model's qwen3 and qwen3moe shapes (the loader's side is model/qwen3.h, whose header lists
// the keys and tensors).
#pragma once

#include <string>

#include "model/config.h"

namespace kamera {

class GgufWriter;

// Presets: qwen3 "tiny" (head 32 x 4 heads on a 64 residual: key_length != dim / heads) and
// "0.6b" (Qwen3-0.6B as released); qwen3moe "tiny" (8 experts of 32, 2 used, untied head) and
// "30b-a3b-2l" (Qwen3-30B-A3B's shapes with 2 of its 48 layers); qwen3vl "tiny" (qwen3's with 3
// layers, interleaved sections [6, 5, 5], 2 deepstack layers) and "2b" (Qwen3-VL-2B's decoder);
// qwen3vlmoe "tiny" (qwen3moe's, the same rope and deepstack) and "30b-a3b-3l" (Qwen3-VL-30B-A3B's
// with 3 layers). False for another name.
bool qwen3_preset(Arch arch, const std::string& preset, ModelConfig& c);

// The expert keys of qwen3moe and qwen3vlmoe and qwen3vl's n_deepstack_layers, as
// model/qwen3.cpp and model/qwen3vl.cpp read them back (nothing for qwen3).
void write_qwen3moe_keys(GgufWriter& w, const ModelConfig& c);

}  // namespace kamera
