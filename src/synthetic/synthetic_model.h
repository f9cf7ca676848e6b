// Seeded random-weight models with real shapes, written as GGUF files that kamera and llama.cpp
// both load (llama.cpp key and tensor names, an embedded SentencePiece vocabulary learned on a
// built-in English text so text prompts work). For speed and exactness work, not for accuracy.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kamera {

class GgufWriter;

struct SyntheticSpec {
  ModelConfig cfg;  // arch, shapes, rope, qkv_bias, tied_output
  uint64_t seed = 0;
  DType weight_type = DType::F32;  // 2-D weights; norms and biases stay f32 (as llama.cpp does)
  std::string name = "kamera-synthetic";
  std::optional<Tokenizer::Vocab> vocab;  // default: a SentencePiece vocabulary of n_vocab pieces
  // Pieces of the default vocabulary replaced by these control tokens (just before the Qwen-VL
  // vision tokens of a qwen2vl / qwen3vl decoder, else the last ones): tests write prompts with a
  // real model's special tokens (Kimi-VL's <|media_start|> ...) on a random-weight file.
  std::vector<std::string> control_tokens;
  // A Qwen3-Reranker as llama.cpp's converter writes it (synthetic/reranker.h): qwen3 only.
  bool reranker = false;
};

// Named shapes: "tiny" (tests, every architecture; qwen3, qwen3moe: synthetic/qwen3_shapes.h, with
// "0.6b" and "30b-a3b-2l"), "0.5b" (llama, qwen2: Qwen2.5-0.5B's text
// decoder: 24 layers, hidden 896, 14 heads, 2 KV heads, head 64, FFN 4864, vocab 151936), "3b" and
// "7b" (qwen2: Qwen2.5-3B's and Qwen2.5-7B's text decoders), "2b" /
// "3b" (qwen2vl: Qwen2-VL-2B's and Qwen2.5-VL-3B's text decoders); deepseek2: "tiny-moe" (MoE
// layers and YaRN), "lite" (DeepSeek-V2-Lite as released), "lite-attn" (its attention, dense
// FFNs): synthetic/deepseek2_shapes.h. Returns nullopt for a name the architecture does not have.
std::optional<ModelConfig> synthetic_preset(Arch arch, const std::string& preset);
std::vector<std::string> synthetic_preset_names(Arch arch);  // the presets of one architecture

// Applies "key=value,..." overrides (dim, layers, heads, kv_heads, head_dim, ffn, vocab, ctx,
// rope_dims, theta, eps, bias, tied) to a config.
Status apply_dims(ModelConfig& cfg, const std::string& dims);

// Shapes kamera runs but llama.cpp (checked at commit c392e50, Feb 2025) refuses to load:
// partial rotary, qwen2 without QKV bias, qwen2 with head_dim * heads != dim; or computes
// otherwise (qwen3vl sections that leave pairs to ggml's 4th rope component, d32676d). One line
// each.
std::vector<std::string> llama_cpp_incompatibilities(const ModelConfig& cfg);

// Number of weights a model of this config holds (all tensors of the file).
int64_t count_parameters(const ModelConfig& cfg);

// Writes the GGUF. Deterministic: the same spec gives the same bytes.
Status write_synthetic_gguf(const SyntheticSpec& spec, const std::string& path);

// Fills one tensor: name (llama.cpp's), GGUF shape (ne[0] contiguous: a weight is {in, out}, i.e.
// out rows of in values, as PyTorch holds a Linear), destination of ne[0] * ne[1] floats.
using TensorFill =
    std::function<void(const std::string& name, const std::vector<int64_t>& ne, float* dst)>;

// Writes a decoder GGUF of config `c` (llama, qwen2, qwen2vl, deepseek2, qwen3(moe) layouts,
// llama.cpp names) with the given vocabulary and weights (used by make-model and by the mini-VL
// trainer's export). `fill` is called while writing, one tensor at a time. `extra` (optional)
// adds keys and tensors after the decoder's (a reranker's head: synthetic/reranker.h).
Status write_decoder_gguf(const ModelConfig& c, const std::string& model_name, DType weight_type,
                          const Tokenizer::Vocab& vocab, const TensorFill& fill,
                          const std::string& path,
                          const std::function<void(GgufWriter&)>& extra = nullptr);

}  // namespace kamera
