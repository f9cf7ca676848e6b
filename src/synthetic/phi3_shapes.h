// make-model's phi3 shapes (the loader's side is model/phi3.h, whose header lists the keys and
// tensors): fused attn_qkv and ffn_up, partial rotary, LongRoPE factor sets and attn_factor, the
// Phi chat tokens and template.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace kamera {

class GgufWriter;

// Presets: "tiny" (64 wide, 4 heads of 16 with 12 rotated, 2 KV heads, 2 layers, context 8192
// over an original 4096) and "phi4-mini" (Phi-4-mini-instruct's shapes: hidden 3072, 32 layers,
// 24 heads, 8 KV heads, head 128 with 96 rotated, FFN 8192, vocabulary 200064, context 131072
// over 4096). The factor values are made up (short near 1, long growing with the pair); the
// attn_factor is sqrt(1 + ln(ctx / orig) / ln(orig)) as Phi-3's converter computes it. False for
// another name.
bool phi3_preset(const std::string& preset, ModelConfig& c);

// rope.scaling.original_context_length and rope.scaling.attn_factor (nothing for another arch).
void write_phi3_keys(GgufWriter& w, const ModelConfig& c);

// The control tokens a phi3 vocabulary carries (llama.cpp requires <|endoftext|> in a phi3 file
// whose name says phi3), and the chat template make-model embeds (tokenizer.chat_template, run as
// Jinja): <|system|>...<|end|><|user|>...<|end|><|assistant|>, Phi-4-mini's turns.
const std::vector<std::string>& phi3_control_tokens();
const char* phi3_chat_template();

}  // namespace kamera
