// The forward of LLaVA's tower (the math is in llava_vision.h; MobileVLM V2's ldpv2 projector
// too): one picture of image_size x image_size pixels -> its rows() rows of the decoder's width.
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/llava_vision.h"

namespace kamera {

class ThreadPool;

// Where the class token sits and which rows leave the tower: llama.cpp's clip graph (the class
// token last, positions in file order, rows 1 .. n kept) or Hugging Face's CLIPVisionEmbeddings
// (the class token first with pos[0], the n patch rows kept). kamera serves llama.cpp's.
enum class LlavaClassOrder { kLlamaCpp, kHuggingFace };

class LlavaVisionEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  LlavaVisionEncoder(const LlavaVisionModel& model, ThreadPool* pool,
                     LlavaClassOrder order = LlavaClassOrder::kLlamaCpp)
      : m_(model), pool_(pool), order_(order) {}

  // rows() x out_dim rows of one picture of image_size x image_size.
  Result<std::vector<float>> encode(const Image& picture);
  // Asked before each layer: true stops the encode (an InvalidArgument saying so). Empty: never.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

 private:
  void embed(const std::vector<float>& patches);
  void block(const LlavaVisionWeights::Layer& L);
  std::vector<float> project() const;

  const LlavaVisionModel& m_;
  ThreadPool* pool_;
  LlavaClassOrder order_;
  std::function<bool()> stop_;
  std::vector<float> x_, nrm_, q_, k_, v_, att_, h1_, attn_scratch_;
  std::vector<int32_t> members_, offsets_;
};

}  // namespace kamera
