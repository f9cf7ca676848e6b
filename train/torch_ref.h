// What the independent libtorch forwards of the vision towers share (kamera-qwen-vision-ref,
// kamera-kimi-vision-ref): a GGUF file's tensors as double torch tensors of their PyTorch shapes,
// LayerNorm / RMSNorm and Linear by tensor name, and kamera's rows measured against the forward's.
#pragma once

#include <torch/torch.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "ops/gemm.h"

namespace torch_ref {

// The file's tensors by name, as torch tensors of their PyTorch shapes (GGUF ne reversed).
struct Weights {
  std::shared_ptr<const kamera::GgufFile> file;
  torch::Tensor operator()(const std::string& name) const {
    const kamera::GgufTensor* t = file->find_tensor(name);
    if (!t) throw std::runtime_error("missing tensor " + name);
    auto v = file->read_f32(*t);
    if (!v.ok()) throw std::runtime_error(v.message());
    std::vector<int64_t> shape(t->ne.rbegin(), t->ne.rend());
    return torch::from_blob(v->data(), shape, torch::kFloat32).clone().to(torch::kFloat64);
  }
  bool has(const std::string& name) const { return file->find_tensor(name) != nullptr; }
};

// LayerNorm n (n.weight, n.bias) over the last dimension, or RMSNorm (n.weight) where rms.
inline torch::Tensor layer_norm(const torch::Tensor& x, const Weights& W, const std::string& n,
                                double eps, bool rms = false) {
  namespace F = torch::nn::functional;
  if (rms) return x * torch::rsqrt(x.pow(2).mean(-1, true) + eps) * W(n + ".weight");
  return F::layer_norm(
      x,
      F::LayerNormFuncOptions({x.size(-1)}).weight(W(n + ".weight")).bias(W(n + ".bias")).eps(eps));
}

// Linear n: x n.weight^T + n.bias.
inline torch::Tensor lin(const torch::Tensor& x, const Weights& W, const std::string& n) {
  return torch::nn::functional::linear(x, W(n + ".weight"), W(n + ".bias"));
}

// kamera's rows against the forward's (f32, contiguous): max |kamera - torch|, max |torch| and
// their ratio.
struct RowsDiff {
  double max_abs_diff = 0, max_abs = 0, rel = 0;
};

// false (after saying so) where the two differ in size.
inline bool compare_rows(const std::vector<float>& rows, const torch::Tensor& ref, RowsDiff* d) {
  const float* r = ref.data_ptr<float>();
  if (size_t(ref.numel()) != rows.size()) return std::fprintf(stderr, "size mismatch\n"), false;
  double num = 0, den = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    num = std::max(num, std::abs(double(rows[i]) - r[i]));
    den = std::max(den, std::abs(double(r[i])));
  }
  *d = {num, den, num / den};
  return true;
}

// The options both tools take: --threshold (of the largest magnitude) and -t,--threads.
inline void add_check_options(CLI::App& app, double* threshold, int* threads) {
  app.add_option("--threshold", *threshold, "max |kamera - torch| / max |torch|")
      ->capture_default_str();
  app.add_option("-t,--threads", *threads, "threads")->capture_default_str();
}

// libtorch's and kamera's BLAS threads.
inline void use_threads(int threads) {
  torch::set_num_threads(threads);
  kamera::set_blas_threads(threads);
}

// Model::random(cfg, seed) written (f32) to a scratch file named after `tool` and this process:
// its path, or "" where writing fails.
template <class Model, class Config>
std::string write_random(const Config& cfg, uint64_t seed, const std::string& tool) {
  const std::string path = "/tmp/" + tool + "-" + std::to_string(::getpid()) + ".gguf";
  return Model::random(cfg, seed).write_gguf(path, kamera::DType::F32).ok() ? path : "";
}

// The tensors of the tower file at `path` (removed after reading where `scratch`); none where the
// file does not open.
inline std::optional<Weights> read_weights(const std::string& path, bool scratch) {
  auto file = kamera::GgufFile::open(path);
  if (scratch) std::remove(path.c_str());
  if (!file.ok()) return std::nullopt;
  return Weights{*file};
}

}  // namespace torch_ref
