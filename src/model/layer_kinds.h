// Per-layer attention kinds (LayerKind in model/config.h), and the two families that need them,
// as llama.cpp d32676d reads and runs them (src/models/smollm3.cpp, src/models/gemma3.cpp,
// src/llama-hparams.cpp):
//
// smollm3: a llama decoder (normal-pair rope, SwiGLU, optional tied head) whose layer il has no
//   rope when (il + 1) % 4 == 0. llama.cpp hard-codes the interval 4 (n_no_rope_layer_step):
//   convert_hf_to_gguf.py writes no key for Hugging Face's no_rope_layers, so neither reads one.
//
// gemma3 (text):
//   - {arch}.attention.sliding_window = W > 0 makes layer il Local when il % P < P - 1, with
//     P = {arch}.attention.sliding_window_pattern (a scalar; absent: 6, Gemma 3's 5 local layers
//     per global one; an array is refused, as llama.cpp refuses it), the others Global. Absent
//     or 0: every layer Global.
//   - Local layers rope with {arch}.rope.freq_base_swa (absent: 10000, the converter writes
//     none) and frequency scale 1; Global layers with rope.freq_base (1M) and rope.scaling.
//   - A Local layer's query at position p reads key j only when p - pos_j < W (llama.cpp's
//     is_masked_swa, LLAMA_SWA_TYPE_STANDARD), on top of causality by sequence order.
//   - Token rows are scaled by sqrt(dim) (embedding rows given to the forward are not).
//   - Per layer: attn_norm; q/k per-head RMSNorm (attn_q_norm, attn_k_norm) before the NeoX rope;
//     queries scaled by 1 / sqrt(head_dim) (62 layers, the 27B: 1 / sqrt(dim / n_heads));
//     post_attention_norm on W_o's output before the residual add; ffn_norm; the FFN
//     down(gelu_tanh(gate x) * up x); post_ffw_norm on its output before the residual add.
//   - Every norm weight is stored with Gemma's + 1 already added (convert_hf_to_gguf.py adds 1 to
//     each *norm.weight because Gemma3RMSNorm multiplies by 1 + w), so it is used as stored.
//   - {arch}.final_logit_softcapping c (optional, absent in Gemma 3): logits = c tanh(logits / c).
//
// KV memory: a Context bounds the Local layers' rows by the window (KvPool's window layers, given
// back as the window passes; Engine::window_rows), as llama.cpp without --swa-full; with
// ContextOptions::swa_full every token's rows stay, so a relocated or reused segment is read again
// if a later placement brings it back inside the window. See docs/MODELS.md, "KV memory".
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace kamera {

class GgufFile;

// smollm3: NoRope on every fourth layer (il + 1) % 4 == 0, Global elsewhere.
std::vector<LayerKind> smollm3_layer_kinds(int n_layers);
// gemma3: Local when il % pattern < pattern - 1 (pattern 0: every layer Local), Global elsewhere.
std::vector<LayerKind> gemma3_layer_kinds(int n_layers, int pattern);

// The per-layer keys of a smollm3 or gemma3 file into c (after the shape is read).
Status read_layer_kinds(const GgufFile& f, ModelConfig& c);

Status validate_layer_kinds(const ModelConfig& c, const std::string& src);
// "nope (layers 3, 7, ...)", "sliding_window (W, local layers ..., local rope base ...)",
// "gemma3 (...)" for `kamera info -m`.
void add_layer_kind_features(const ModelConfig& c, std::vector<std::string>& out);

// The queries' scale in attention: c.attn_scale, or 1 / sqrt(head_dim).
float attention_scale(const ModelConfig& c);

}  // namespace kamera
