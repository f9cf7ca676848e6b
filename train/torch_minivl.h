// The mini-VL model in libtorch: the trainer's own implementation of the vision encoder and the
// qwen2vl decoder (an independent forward the engine is checked against), batching of clips,
// and the import/export of kamera's two GGUF files.
#pragma once

#include <torch/torch.h>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "minivl/minivl.h"

namespace kamera::train {

// One training/eval example: a clip's frames and one of its questions.
struct Example {
  const minivl::Clip* clip = nullptr;
  const minivl::Question* question = nullptr;
};

class TorchMiniVl : public torch::nn::Module {
 public:
  TorchMiniVl(const ModelConfig& dec, const VisionConfig& vis);

  // Vision tokens of n frames: uint8 [n, S, S, 3] -> float [n, tokens, dim].
  torch::Tensor encode(const torch::Tensor& frames_u8);
  // Decoder logits [B, T, V] for input embeddings x [B, T, D] at (t, h, w) positions [T, 3];
  // `mask` [T, T] is added to the attention scores (undefined: causal).
  torch::Tensor decode(torch::Tensor x, const torch::Tensor& pos, torch::Tensor mask = {});
  // Logits at each example's last question token [B, V] (frames of the examples' clips). The
  // questions of one clip share one packed sequence (see packed_mask); each answer's logits are
  // those of the question's own sequence [<bos>][frames][question].
  torch::Tensor answer_logits(const std::vector<Example>& batch);
  // All-position logits [T, V] of one example (the cross-check).
  torch::Tensor sequence_logits(const Example& e);
  // Text only: logits [B, T, V] of token ids [B, T] at positions 0..T-1 (t = h = w).
  torch::Tensor text_logits(const torch::Tensor& ids);

  // Named parameters with kamera's GGUF names and shapes.
  std::vector<std::pair<std::string, torch::Tensor>> gguf_tensors() const;
  Status export_files(const std::string& decoder_path, const std::string& vision_path) const;
  // The decoder alone, with this vocabulary, its 2-D weights as `weight_type`.
  Status export_decoder(const std::string& path, const Tokenizer::Vocab& vocab,
                        const std::string& name, DType weight_type) const;
  Status import_files(const std::string& decoder_path, const std::string& vision_path);
  // The decoder's weights from a loaded model of this shape (any weight type, as f32).
  Status import_decoder(const Model& d);

  const ModelConfig& decoder_cfg() const { return dc_; }
  const VisionConfig& vision_cfg() const { return vc_; }

 private:
  torch::Tensor rms(const torch::Tensor& x, const torch::Tensor& w, double eps) const;
  torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos,
                     const torch::Tensor& sin) const;
  // The q, k, v projections (with bias) and the SwiGLU FFN of the block named pf.
  std::array<torch::Tensor, 3> qkv(const torch::Tensor& h, const std::string& pf);
  torch::Tensor swiglu(const torch::Tensor& h, const std::string& pf);
  torch::Tensor P(const std::string& name, std::vector<int64_t> shape, double scale, double init);
  Status set_param(const std::string& name, const std::vector<float>& v);

  ModelConfig dc_;
  VisionConfig vc_;
  std::vector<std::pair<std::string, torch::Tensor>> named_;  // GGUF name -> parameter
  std::map<std::string, torch::Tensor> by_name_;
  torch::Tensor& at(const std::string& n) { return by_name_.at(n); }
};

// Positions (t, h, w) of [<bos>, F frames, q question tokens] as the engine lays them out.
torch::Tensor sequence_positions(int n_frames, int token_grid, int n_text);

// The attention mask of a packed sequence [prefix][segment 0]...[segment S-1], segments `seg`
// long: prefix rows are causal; a segment's rows see the prefix and their own segment's earlier
// rows (0 where seen, -inf elsewhere), so each segment reads as if it followed the prefix alone.
torch::Tensor packed_mask(int64_t prefix, int64_t seg, int64_t n_segments);

}  // namespace kamera::train
