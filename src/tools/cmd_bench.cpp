// kamera bench prefill|decode: engine speed, and OpenBLAS alone on the same GEMM shapes in the
// same run, so the reported number is a ratio (engine time vs the BLAS floor).
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "model/forward.h"
#include "ops/gemm.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct BenchArgs {
  std::string mode, model;
  int tokens = 512, ctx = 64, reps = 5, threads = default_threads();
  uint64_t seed = 1;
  bool json = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs the GEMMs a forward of n new tokens after `past` cached ones performs, with the model's
// own weights, through the same OpenBLAS entry points; returns nothing (timed by the caller).
struct GemmFloor {
  const Model& m;
  std::vector<float> x, y, q, k, s;
  explicit GemmFloor(const Model& model) : m(model) {}

  void run(int n, int past) {
    const ModelConfig& c = m.cfg;
    const int d = c.dim, qw = c.q_width(), kvw = c.kv_width(), h = c.ffn_dim, hd = c.head_dim;
    const size_t wmax = std::max({d, qw, h});
    if (x.size() < size_t(n) * wmax) x.assign(size_t(n) * wmax, 0.01f);
    if (y.size() < size_t(n) * wmax) y.resize(size_t(n) * wmax);
    const int N = past + n;
    if (k.size() < size_t(N) * kvw) k.assign(size_t(N) * kvw, 0.01f);
    if (q.size() < size_t(n) * qw) q.assign(size_t(n) * qw, 0.01f);
    for (const LayerWeights& L : m.layers) {
      matmul_wt(x.data(), L.wq.data(), nullptr, y.data(), n, d, qw);
      matmul_wt(x.data(), L.wk.data(), nullptr, y.data(), n, d, kvw);
      matmul_wt(x.data(), L.wv.data(), nullptr, y.data(), n, d, kvw);
      if (n >= 8) {  // attention's score and value products, as the engine blocks them
        const int qb = std::min(n, 256);
        if (s.size() < size_t(qb) * N) s.resize(size_t(qb) * N);
        for (int head = 0; head < c.n_heads; ++head)
          for (int t0 = 0; t0 < n; t0 += qb) {
            const int rows = std::min(n, t0 + qb) - t0, nk = past + t0 + rows;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, hd, 1.0f,
                        q.data() + size_t(t0) * qw, qw, k.data(), kvw, 0.0f, s.data(), nk);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, nk, 1.0f, s.data(), nk,
                        k.data(), kvw, 0.0f, y.data() + size_t(t0) * qw, qw);
          }
      }
      matmul_wt(x.data(), L.wo.data(), nullptr, y.data(), n, qw, d);
      matmul_wt(x.data(), L.w_gate.data(), nullptr, y.data(), n, d, h);
      matmul_wt(x.data(), L.w_up.data(), nullptr, y.data(), n, d, h);
      matmul_wt(x.data(), L.w_down.data(), nullptr, y.data(), n, h, d);
    }
    std::vector<float> logits(c.n_vocab);
    matmul_wt(x.data(), m.output_weight(), nullptr, logits.data(), 1, d, c.n_vocab);
  }
};

// Multiply-adds x2 of one forward of n tokens after `past` (weights and attention).
double forward_flops(const ModelConfig& c, int n, int past) {
  const double d = c.dim, q = c.q_width(), kv = c.kv_width(), h = c.ffn_dim;
  const double per_token = d * q + 2 * d * kv + q * d + 3 * d * h;
  double attn = 0;
  for (int t = 0; t < n; ++t) attn += 2.0 * (past + t + 1) * c.head_dim * c.n_heads;
  return 2.0 * (per_token * n * c.n_layers + d * c.n_vocab) + 2.0 * attn * c.n_layers;
}

int run_bench(const BenchArgs& a) {
  if (a.mode != "prefill" && a.mode != "decode")
    return fail(fmt::format("bench mode must be prefill or decode, not '{}'", a.mode), a.json);
  auto loaded = load_for_cli(a.model, "");
  if (!loaded.ok()) return fail(loaded.message(), a.json);
  const Model& m = **loaded;
  const ModelConfig& c = m.cfg;
  if (a.tokens < 1 || a.reps < 1) return fail("--tokens and --reps must be >= 1", a.json);
  const int past = a.mode == "prefill" ? 0 : a.ctx;
  const int total = past + a.tokens;
  std::mt19937 rng(uint32_t(a.seed));
  std::vector<int32_t> ids(total);
  for (auto& t : ids) t = int32_t(rng() % uint32_t(c.n_vocab));
  std::vector<Pos> pos(total);
  for (int i = 0; i < total; ++i) pos[i] = Pos::linear(i);

  auto pool = pool_for(m, total);
  if (!pool.ok()) return fail(pool.message(), a.json);
  Engine engine(m, a.threads);
  GemmFloor floor(m);

  auto run_engine = [&]() -> Result<double> {
    const SeqId seq = (*pool)->create_sequence();
    double ms = 0;
    if (a.mode == "prefill") {
      const double t0 = now_ms();
      auto l = engine.forward(**pool, seq, ForwardInput::from_tokens(ids, pos));
      ms = now_ms() - t0;
      if (!l.ok()) return l.error();
    } else {
      auto l = engine.forward(
          **pool, seq,
          ForwardInput::from_tokens({ids.data(), size_t(past)}, {pos.data(), size_t(past)}));
      if (!l.ok()) return l.error();
      const double t0 = now_ms();
      for (int i = past; i < total; ++i) {
        l = engine.forward(**pool, seq, ForwardInput::from_tokens({&ids[i], 1}, {&pos[i], 1}));
        if (!l.ok()) return l.error();
      }
      ms = now_ms() - t0;
    }
    (*pool)->free_sequence(seq);
    return ms;
  };
  auto run_floor = [&]() {
    const double t0 = now_ms();
    if (a.mode == "prefill") {
      floor.run(a.tokens, 0);
    } else {
      for (int i = past; i < total; ++i) floor.run(1, i);
    }
    return now_ms() - t0;
  };

  // Warm-up, then alternate engine and floor runs so both see the same machine state.
  if (auto w = run_engine(); !w.ok()) return fail(w.message(), a.json);
  run_floor();
  std::vector<double> eng, flo;
  for (int r = 0; r < a.reps; ++r) {
    auto e = run_engine();
    if (!e.ok()) return fail(e.message(), a.json);
    eng.push_back(*e);
    flo.push_back(run_floor());
    if (!a.json)
      std::fprintf(stderr, "kamera: bench rep %d/%d: engine %.1f ms, BLAS floor %.1f ms\n", r + 1,
                   a.reps, *e, flo.back());
  }
  const double e_ms = median(eng), f_ms = median(flo);
  double flops = 0;
  if (a.mode == "prefill") {
    flops = forward_flops(c, a.tokens, 0);
  } else {
    for (int i = past; i < total; ++i) flops += forward_flops(c, 1, i);
  }
  const double tps = a.tokens / (e_ms / 1e3);
  json j{{"mode", a.mode},
         {"model", model_summary(m)},
         {"threads", a.threads},
         {"tokens", a.tokens},
         {"context_before", past},
         {"reps", a.reps},
         {"engine_ms_median", e_ms},
         {"blas_floor_ms_median", f_ms},
         {"tokens_per_s", tps},
         {"engine_gflops", flops / (e_ms * 1e6)},
         {"blas_floor_gflops", flops / (f_ms * 1e6)},
         {"share_of_blas", f_ms / e_ms},
         {"engine_ms_all", eng},
         {"blas_floor_ms_all", flo}};
  if (a.json) {
    print_json(j, 2);
  } else {
    std::printf(
        "%s %d tokens (after %d), %d threads: %.1f tok/s, %.1f GFLOP/s; OpenBLAS alone on the "
        "same GEMM shapes %.1f GFLOP/s; engine reaches %.0f%% of it\n",
        a.mode.c_str(), a.tokens, past, a.threads, tps, flops / (e_ms * 1e6), flops / (f_ms * 1e6),
        100.0 * f_ms / e_ms);
  }
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("mode", a->mode, "prefill or decode")
      ->required()
      ->check(CLI::IsMember({"prefill", "decode"}));
  add_model_option(app, a->model);
  app.add_option("--tokens", a->tokens, "prefill: prompt length; decode: tokens generated")
      ->capture_default_str();
  app.add_option("--ctx", a->ctx, "decode: tokens already in the cache before timing")
      ->capture_default_str();
  app.add_option("--reps", a->reps, "Timed repetitions after one warm-up (median reported)")
      ->capture_default_str();
  add_threads_option(app, a->threads);
  app.add_option("--seed", a->seed, "Seed of the random token ids")->capture_default_str();
  app.add_flag("--json", a->json, "Print a JSON object");
  return [a] { return run_bench(*a); };
}

}  // namespace kamera::cli
