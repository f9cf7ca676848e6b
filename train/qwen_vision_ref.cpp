// kamera-qwen-vision-ref: an independent libtorch forward of the Qwen2-VL / Qwen2.5-VL vision
// tower, written from Hugging Face's published model code (modeling_qwen2_vl.py,
// modeling_qwen2_5_vl.py) in its own formulation: the patch embedding is the Conv3d applied to
// pixel_values.view(-1, 3, 2, 14, 14), positions come from arange/reshape/permute as in
// rot_pos_emb, RoPE is rotate_half on cat(freqs, freqs), attention is dense with the
// block-diagonal masks built from cu_seqlens, and Qwen2.5-VL's windows come from get_window_index
// (pad to whole windows, permute, drop the padding) with the hidden states permuted into window
// order and back. It compares the result with kamera's engine (QwenVisionEncoder) on the same
// pixels and exits 1 when they differ by more than --threshold (of the largest magnitude).
//
//   kamera-qwen-vision-ref --random qwen25vl:tiny:7 --image img.png [--frames a,b,c]
//   kamera-qwen-vision-ref --mmproj mmproj.gguf --image img.png
#include <torch/torch.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "media/image.h"
#include "ops/gemm.h"
#include "torch_ref.h"
#include "vision/qwen_vision_encoder.h"

using namespace kamera;
using torch_ref::layer_norm;
using torch_ref::lin;
using torch_ref::Weights;
namespace F = torch::nn::functional;

namespace {

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t h = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, h), x.slice(-1, 0, h)}, -1);
}

// rot_pos_emb: [n, head_dim / 2] angles (h freqs, w freqs) in the tower's patch order.
torch::Tensor rot_pos_emb(int64_t t, int64_t h, int64_t w, int64_t head_dim, int64_t sms) {
  auto hpos = torch::arange(h).unsqueeze(1).expand({-1, w});
  hpos = hpos.reshape({h / sms, sms, w / sms, sms}).permute({0, 2, 1, 3}).flatten();
  auto wpos = torch::arange(w).unsqueeze(0).expand({h, -1});
  wpos = wpos.reshape({h / sms, sms, w / sms, sms}).permute({0, 2, 1, 3}).flatten();
  auto pos = torch::stack({hpos, wpos}, -1).repeat({t, 1});  // [n, 2]
  const int64_t dim = head_dim / 2;
  auto inv = 1.0 / torch::pow(10000.0, torch::arange(0, dim, 2, torch::kFloat64) / double(dim));
  auto freqs = torch::outer(torch::arange(std::max(h, w), torch::kFloat64), inv);
  return freqs.index({pos}).flatten(1);
}

// get_window_index of Qwen2.5-VL: window order of merged tokens and cumulative window lengths.
std::pair<torch::Tensor, std::vector<int64_t>> window_index(int64_t t, int64_t h, int64_t w,
                                                            int64_t vmws, int64_t sms) {
  const int64_t lh = h / sms, lw = w / sms;
  auto index = torch::arange(t * lh * lw).reshape({t, lh, lw});
  const int64_t pad_h = vmws - lh % vmws, pad_w = vmws - lw % vmws;
  const int64_t nh = (lh + pad_h) / vmws, nw = (lw + pad_w) / vmws;
  auto padded = F::pad(index, F::PadFuncOptions({0, pad_w, 0, pad_h}).value(-100));
  padded = padded.reshape({t, nh, vmws, nw, vmws}).permute({0, 1, 3, 2, 4});
  padded = padded.reshape({t, nh * nw, vmws, vmws});
  auto seqlens = (padded != -100).sum({2, 3}).reshape({-1});
  padded = padded.reshape({-1});
  auto idx = padded.index({padded != -100});
  std::vector<int64_t> cu = {0};
  auto cs = seqlens.cumsum(0) * sms * sms;
  for (int64_t i = 0; i < cs.size(0); ++i)
    if (cs[i].item<int64_t>() != cu.back()) cu.push_back(cs[i].item<int64_t>());  // unique
  return {idx, cu};
}

torch::Tensor block_mask(const std::vector<int64_t>& cu, int64_t n) {
  auto m = torch::full({n, n}, -std::numeric_limits<double>::infinity(), torch::kFloat64);
  for (size_t i = 1; i < cu.size(); ++i)
    m.index_put_(
        {torch::indexing::Slice(cu[i - 1], cu[i]), torch::indexing::Slice(cu[i - 1], cu[i])}, 0.0);
  return m;
}

torch::Tensor forward(const QwenVisionConfig& c, const Weights& W, const QwenPatches& p) {
  torch::NoGradGuard ng;
  const int64_t d = c.dim, H = c.n_heads, hd = c.head_dim(), sms = c.merge;
  const bool v25 = c.variant == QwenVisionVariant::Qwen25VL;
  auto pv = torch::from_blob(const_cast<float*>(p.values.data()),
                             {p.n_patches(), int64_t(p.patch_values)}, torch::kFloat32)
                .to(torch::kFloat64);
  // PatchEmbed: Conv3d (2, 14, 14), weight [d, 3, 2, 14, 14] from the file's two frames
  auto w3 = torch::stack({W("v.patch_embd.weight"), W("v.patch_embd.weight.1")}, 2);
  auto x = F::conv3d(pv.view({-1, 3, 2, c.patch, c.patch}), w3,
                     F::Conv3dFuncOptions().stride({2, c.patch, c.patch}));
  x = x.view({-1, d});
  if (W.has("v.patch_embd.bias")) x = x + W("v.patch_embd.bias");
  auto rpe = rot_pos_emb(p.grid_t, p.grid_h, p.grid_w, hd, sms);
  const int64_t n = x.size(0);
  std::vector<int64_t> cu = {0};
  for (int t = 0; t < p.grid_t; ++t) cu.push_back(cu.back() + int64_t(p.grid_h) * p.grid_w);
  torch::Tensor widx;
  std::vector<int64_t> cu_win;
  if (v25) {  // hidden states and angles into window order
    std::tie(widx, cu_win) =
        window_index(p.grid_t, p.grid_h, p.grid_w, c.window / sms / c.patch, sms);
    x = x.reshape({n / (sms * sms), sms * sms, -1}).index({widx}).reshape({n, -1});
    rpe = rpe.reshape({n / (sms * sms), sms * sms, -1}).index({widx}).reshape({n, -1});
  }
  auto emb = torch::cat({rpe, rpe}, -1);
  auto cos = emb.cos().unsqueeze(1), sin = emb.sin().unsqueeze(1);  // [n, 1, hd]
  const auto full_mask = block_mask(cu, n);
  const auto win_mask = v25 ? block_mask(cu_win, n) : full_mask;
  // which FFN tensor reads the width (llama.cpp's Qwen2-VL surgery names it ffn_down)
  const bool legacy = W("v.blk.0.ffn_down.weight").size(1) == d && c.ffn_dim != d;
  const std::string in_n = legacy ? "ffn_down" : "ffn_up", out_n = legacy ? "ffn_up" : "ffn_down";
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "v.blk." + std::to_string(l) + ".";
    auto h = layer_norm(x, W, b + "ln1", c.eps, v25);
    auto q = lin(h, W, b + "attn_q").view({n, H, hd});
    auto k = lin(h, W, b + "attn_k").view({n, H, hd});
    auto v = lin(h, W, b + "attn_v").view({n, H, hd});
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    q = q.transpose(0, 1), k = k.transpose(0, 1), v = v.transpose(0, 1);  // [H, n, hd]
    auto s = torch::matmul(q, k.transpose(1, 2)) / std::sqrt(double(hd)) +
             (c.full_attention(l) ? full_mask : win_mask);
    auto o = torch::matmul(torch::softmax(s, -1), v).transpose(0, 1).reshape({n, d});
    x = x + lin(o, W, b + "attn_out");
    h = layer_norm(x, W, b + "ln2", c.eps, v25);
    torch::Tensor f;
    if (v25) {
      f = lin(torch::silu(lin(h, W, b + "ffn_gate")) * lin(h, W, b + in_n), W, b + out_n);
    } else {
      auto u = lin(h, W, b + in_n);
      u = c.act == QwenVisionAct::Gelu ? F::gelu(u) : u * torch::sigmoid(1.702 * u);
      f = lin(u, W, b + out_n);
    }
    x = x + f;
  }
  // PatchMerger: ln_q, view(-1, 4 d), Linear, GELU, Linear
  auto y = layer_norm(x, W, "v.post_ln", c.eps, v25).view({-1, d * sms * sms});
  y = lin(F::gelu(lin(y, W, "mm.0")), W, "mm.2");
  if (v25) y = y.index({torch::argsort(widx)});
  return y.to(torch::kFloat32).contiguous();
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Independent libtorch forward of a Qwen2-VL / Qwen2.5-VL vision tower, compared "
      "with kamera's"};
  std::string mmproj, random, image, frames;
  double threshold = 1e-4;
  int64_t min_pixels = 28 * 28;
  int threads = 2;
  app.add_option("--mmproj", mmproj, "mmproj GGUF");
  app.add_option("--random", random, "arch:preset:seed of a random tower (e.g. qwen25vl:tiny:7)");
  app.add_option("--image", image, "PNG or JPEG");
  app.add_option("--frames", frames, "comma-separated frames (a video)");
  app.add_option("--min-pixels", min_pixels, "preprocessing min_pixels")->capture_default_str();
  torch_ref::add_check_options(app, &threshold, &threads);
  CLI11_PARSE(app, argc, argv);
  torch_ref::use_threads(threads);
  std::string path = mmproj;
  if (!random.empty()) {
    auto cfg = qwen_vision_preset(
        random.substr(0, random.find(':')),
        random.substr(random.find(':') + 1, random.rfind(':') - random.find(':') - 1));
    if (!cfg) return std::fprintf(stderr, "bad --random %s\n", random.c_str()), 2;
    path = torch_ref::write_random<QwenVisionModel>(
        *cfg, std::stoull(random.substr(random.rfind(':') + 1)), "kamera-qwen-vision-ref");
    if (path.empty()) return 2;
  }
  auto model = QwenVisionModel::load(path);
  if (!model.ok()) return std::fprintf(stderr, "%s\n", model.message().c_str()), 2;
  const auto W = torch_ref::read_weights(path, !random.empty());
  if (!W) return 2;
  std::vector<Image> imgs;
  for (const std::string& f : image.empty() ? split(frames) : std::vector<std::string>{image}) {
    auto img = load_image(f);
    if (!img.ok()) return std::fprintf(stderr, "%s\n", img.message().c_str()), 2;
    imgs.push_back(std::move(*img));
  }
  QwenImageOptions opt = QwenImageOptions::from(model->cfg);
  opt.min_pixels = min_pixels;
  auto p = qwen_preprocess_frames(imgs, opt);
  if (!p.ok()) return std::fprintf(stderr, "%s\n", p.message().c_str()), 2;
  ThreadPool pool(threads);
  auto e = QwenVisionEncoder(*model, &pool).encode(*p);
  if (!e.ok()) return std::fprintf(stderr, "%s\n", e.message().c_str()), 2;
  const auto ref = forward(model->cfg, *W, *p);
  torch_ref::RowsDiff d;
  if (!torch_ref::compare_rows(e->rows, ref, &d)) return 1;
  std::printf(
      "{\"tower\": \"%s\", \"grid\": [%d, %d, %d], \"max_abs_diff\": %.3e, "
      "\"max_abs\": %.3e, \"rel\": %.3e, \"threshold\": %.1e}\n",
      model->cfg.variant == QwenVisionVariant::Qwen25VL ? "qwen2.5-vl" : "qwen2-vl", e->grid_t,
      e->grid_h, e->grid_w, d.max_abs_diff, d.max_abs, d.rel, threshold);
  return d.rel <= threshold ? 0 : 1;
}
