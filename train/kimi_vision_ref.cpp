// kamera-kimi-vision-ref: an independent libtorch forward of Kimi-VL's vision tower (MoonViT and
// its projector), written from Hugging Face's published model code (modeling_kimi_vl.py:
// MoonVisionPatchEmbed, Learnable2DInterpPosEmb, Rope2DPosEmb, MoonVitEncoderLayer, patch_merger,
// KimiVLMultiModalProjector) in its own formulation: the patch embedding is the Conv2d applied to
// pixel_values.view(-1, 3, 14, 14), the position table is resized by F.interpolate(bicubic), the
// rotary angles are complex numbers (polar of the x and y frequencies stacked and flattened, the
// head's pairs viewed as complex), attention is dense, the merger is view/permute. In double
// precision. It compares the result with kamera's engine (KimiVisionEncoder) on the same pixels
// and exits 1 when they differ by more than --threshold (of the largest magnitude).
//
//   kamera-kimi-vision-ref --random tiny:7 --image img.png [--token-limit N]
//   kamera-kimi-vision-ref --mmproj mmproj.gguf --image img.png
#include <torch/torch.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "media/image.h"
#include "ops/gemm.h"
#include "torch_ref.h"
#include "vision/kimi_vision_encoder.h"

using namespace kamera;
using torch_ref::layer_norm;
using torch_ref::lin;
using torch_ref::Weights;
namespace F = torch::nn::functional;

namespace {

// Rope2DPosEmb.get_freqs_cis for one (h, w) grid: [h * w, head_dim / 2] complex, the pairs
// alternating x (column) and y (row) angles of frequency theta^(-4i/head_dim).
torch::Tensor freqs_cis(int64_t h, int64_t w, int64_t head_dim, double theta) {
  auto flat = torch::arange(h * w, torch::kFloat64);
  auto x_pos = torch::remainder(flat, double(w)), y_pos = torch::floor_divide(flat, double(w));
  auto dim_range = torch::arange(0, head_dim, 4, torch::kFloat64);
  auto freqs = 1.0 / torch::pow(theta, dim_range / double(head_dim));
  auto xc =
      torch::polar(torch::ones({h * w, head_dim / 4}, torch::kFloat64), torch::outer(x_pos, freqs));
  auto yc =
      torch::polar(torch::ones({h * w, head_dim / 4}, torch::kFloat64), torch::outer(y_pos, freqs));
  return torch::stack({xc, yc}, -1).reshape({h * w, head_dim / 2});
}

// apply_rope: the head's consecutive pairs as complex numbers times freqs_cis.
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cis) {  // x [n, H, hd]
  auto xc = torch::view_as_complex(x.reshape({x.size(0), x.size(1), -1, 2}).contiguous());
  return torch::view_as_real(xc * cis.unsqueeze(1)).flatten(2);
}

torch::Tensor forward(const KimiVisionConfig& c, const Weights& W, const KimiPatches& p) {
  torch::NoGradGuard ng;
  const int64_t d = c.dim, H = c.n_heads, hd = c.head_dim(), h = p.grid_h, w = p.grid_w, n = h * w,
                m = c.merge;
  auto pv = torch::from_blob(const_cast<float*>(p.values.data()), {n, 3, c.patch, c.patch},
                             torch::kFloat32)
                .to(torch::kFloat64);
  // MoonVisionPatchEmbed: Conv2d(3, d, 14, stride 14) per patch, then the position table
  auto x = F::conv2d(pv, W("v.patch_embd.weight"),
                     F::Conv2dFuncOptions().stride(c.patch).bias(W("v.patch_embd.bias")))
               .view({n, d});
  auto table = W("v.position_embd.weight").view({c.pos_side, c.pos_side, d});
  torch::Tensor pos = table.flatten(0, 1);
  if (h != c.pos_side || w != c.pos_side)
    pos =
        F::interpolate(table.permute({2, 0, 1}).unsqueeze(0), F::InterpolateFuncOptions()
                                                                  .size(std::vector<int64_t>{h, w})
                                                                  .mode(torch::kBicubic)
                                                                  .align_corners(false))
            .squeeze(0)
            .permute({1, 2, 0})
            .flatten(0, 1);
  x = x + pos;
  const auto cis = freqs_cis(h, w, hd, c.rope_theta);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "v.blk." + std::to_string(l) + ".";
    auto hs = layer_norm(x, W, b + "ln1", c.eps);
    auto q = apply_rope(lin(hs, W, b + "attn_q").view({n, H, hd}), cis).transpose(0, 1);
    auto k = apply_rope(lin(hs, W, b + "attn_k").view({n, H, hd}), cis).transpose(0, 1);
    auto v = lin(hs, W, b + "attn_v").view({n, H, hd}).transpose(0, 1);
    auto s = torch::matmul(q, k.transpose(1, 2)) / std::sqrt(double(hd));
    auto o = torch::matmul(torch::softmax(s, -1), v).transpose(0, 1).reshape({n, d});
    x = x + lin(o, W, b + "attn_out");
    hs = layer_norm(x, W, b + "ln2", c.eps);
    x = x + lin(F::gelu(lin(hs, W, b + "ffn_up"), F::GELUFuncOptions().approximate("tanh")), W,
                b + "ffn_down");
  }
  x = layer_norm(x, W, "v.post_ln", c.eps);
  // patch_merger: (h/m, m, w/m, m, d) -> (h/m * w/m, m * m, d)
  x = x.view({h / m, m, w / m, m, d}).permute({0, 2, 1, 3, 4}).reshape({-1, m * m, d});
  // KimiVLMultiModalProjector: pre_norm per patch, view(-1, m*m*d), linear_1, GELU, linear_2
  auto y = layer_norm(x, W, "mm.input_norm", c.proj_eps).reshape({-1, m * m * d});
  y = lin(F::gelu(lin(y, W, "mm.1")), W, "mm.2");
  return y.to(torch::kFloat32).contiguous();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Independent libtorch forward of Kimi-VL's vision tower, compared with kamera's"};
  std::string mmproj, random, image;
  double threshold = 1e-4;
  int token_limit = 0;
  int threads = 2;
  app.add_option("--mmproj", mmproj, "mmproj GGUF (projector type kimivl)");
  app.add_option("--random", random, "preset:seed of a random tower (e.g. tiny:7)");
  app.add_option("--image", image, "PNG or JPEG")->required();
  app.add_option("--token-limit", token_limit,
                 "the processor's in_token_limit in patches (0: the file's)");
  torch_ref::add_check_options(app, &threshold, &threads);
  CLI11_PARSE(app, argc, argv);
  torch_ref::use_threads(threads);
  std::string path = mmproj;
  if (!random.empty()) {
    auto cfg = kimi_vision_preset(random.substr(0, random.find(':')));
    if (!cfg) return std::fprintf(stderr, "bad --random %s\n", random.c_str()), 2;
    path = torch_ref::write_random<KimiVisionModel>(
        *cfg, std::stoull(random.substr(random.find(':') + 1)), "kamera-kimi-vision-ref");
    if (path.empty()) return 2;
  }
  auto model = KimiVisionModel::load(path);
  if (!model.ok()) return std::fprintf(stderr, "%s\n", model.message().c_str()), 2;
  const auto W = torch_ref::read_weights(path, !random.empty());
  if (!W) return 2;
  if (token_limit > 0) model->cfg.in_token_limit = token_limit;
  auto img = load_image(image);
  if (!img.ok()) return std::fprintf(stderr, "%s\n", img.message().c_str()), 2;
  auto p = kimi_preprocess_image(*img, model->cfg);
  if (!p.ok()) return std::fprintf(stderr, "%s\n", p.message().c_str()), 2;
  ThreadPool pool(threads);
  auto e = KimiVisionEncoder(*model, &pool).encode(*p);
  if (!e.ok()) return std::fprintf(stderr, "%s\n", e.message().c_str()), 2;
  const auto ref = forward(model->cfg, *W, *p);
  torch_ref::RowsDiff d;
  if (!torch_ref::compare_rows(e->rows, ref, &d)) return 1;
  std::printf(
      "{\"tower\": \"kimi-vl\", \"image\": [%d, %d], \"patches\": [%d, %d], \"tokens\": [%d, %d], "
      "\"max_abs_diff\": %.3e, \"max_abs\": %.3e, \"rel\": %.3e, \"threshold\": %.1e}\n",
      img->width, img->height, p->grid_h, p->grid_w, e->grid_h, e->grid_w, d.max_abs_diff,
      d.max_abs, d.rel, threshold);
  return d.rel <= threshold ? 0 : 1;
}
