// kamera bench prefill|decode: engine speed, and OpenBLAS alone on the same GEMM shapes in the
// same run, so the reported number is a ratio (engine time vs the BLAS floor).
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "cache/chunk_cache.h"
#include "core/thread_pool.h"
#include "eval/metrics.h"
#include "model/forward.h"
#include "ops/gemm.h"
#include "tools/bench_gemm.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct BenchArgs {
  std::string mode, model;
  int tokens = 512, ctx = 64, reps = 5, threads = default_threads();
  int antecedent = 256, rank = 32;
  std::string svd = "auto";
  uint64_t seed = 1;
  bool json = false;
};

// Runs the GEMMs a forward of n new tokens after `past` cached ones performs, with the model's
// own weights, through the same entry points (OpenBLAS for f32 weights and attention, the
// quantized kernels for the other weight types); returns nothing (timed by the caller).
struct GemmFloor {
  const Model& m;
  ThreadPool pool;
  std::vector<float> x, y, q, k, s;
  bool partial = false;  // some layer lacked a dense matrix (MoE, MLA)
  GemmFloor(const Model& model, int threads) : m(model), pool(threads) {}

  void run(int n, int past) {
    const ModelConfig& c = m.cfg;
    const int d = c.dim, qw = c.q_width(), kvw = c.kv_width(), h = c.ffn_dim, hd = c.head_dim;
    const size_t wmax = std::max({d, qw, h});
    if (x.size() < size_t(n) * wmax) x.assign(size_t(n) * wmax, 0.01f);
    if (y.size() < size_t(n) * wmax) y.resize(size_t(n) * wmax);
    const int N = past + n;
    if (k.size() < size_t(N) * kvw) k.assign(size_t(N) * kvw, 0.01f);
    if (q.size() < size_t(n) * qw) q.assign(size_t(n) * qw, 0.01f);
    // Matrices a layer does not have (MoE layers' dense FFN, MLA's q/k/v) are skipped: the floor
    // then covers the dense products only, and `partial` says so.
    auto lin = [&](const Weight& w) {
      if (w.empty()) {
        partial = true;
        return;
      }
      linear(w, x.data(), n, nullptr, y.data(), pool);
    };
    for (const LayerWeights& L : m.layers) {
      lin(L.wq);
      lin(L.wk);
      lin(L.wv);
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
      lin(L.wo);
      lin(L.w_gate);
      lin(L.w_up);
      lin(L.w_down);
    }
    std::vector<float> logits(c.n_vocab);
    linear(m.output_weight(), x.data(), 1, nullptr, logits.data(), pool);
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

int run_bench_serve(const BenchArgs& a);

int run_bench(const BenchArgs& a) {
  if (a.mode == "gemm") return run_bench_gemm({a.model, a.tokens, a.reps, a.threads, a.json});
  if (a.model.empty()) return fail("bench " + a.mode + " needs -m/--model", a.json);
  if (a.mode == "serve") return run_bench_serve(a);
  if (a.mode != "prefill" && a.mode != "decode")
    return fail(fmt::format("bench mode must be prefill, decode, serve or gemm, not '{}'", a.mode),
                a.json);
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

  auto ctx = context_for(*loaded, a.threads, total);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  Engine& engine = (*ctx)->engine();
  KvPool& pool = (*ctx)->pool();
  GemmFloor floor(m, a.threads);

  auto run_engine = [&]() -> Result<double> {
    const SeqId seq = pool.create_sequence();
    double ms = 0;
    if (a.mode == "prefill") {
      const double t0 = now_ms();
      auto l = engine.forward(pool, seq, ForwardInput::from_tokens(ids, pos));
      ms = now_ms() - t0;
      if (!l.ok()) return l.error();
    } else {
      auto l = engine.forward(
          pool, seq,
          ForwardInput::from_tokens({ids.data(), size_t(past)}, {pos.data(), size_t(past)}));
      if (!l.ok()) return l.error();
      const double t0 = now_ms();
      for (int i = past; i < total; ++i) {
        l = engine.forward(pool, seq, ForwardInput::from_tokens({&ids[i], 1}, {&pos[i], 1}));
        if (!l.ok()) return l.error();
      }
      ms = now_ms() - t0;
    }
    pool.free_sequence(seq);
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
         {"system", system_info(&m)},
         {"threads", a.threads},
         {"blas_path", blas_path()},
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
         {"blas_floor_ms_all", flo},
         {"blas_floor_dense_only", floor.partial}};
  if (a.json) {
    print_json(j, 2);
  } else {
    std::printf(
        "%s %d tokens (after %d), %d threads: %.1f tok/s, %.1f GFLOP/s; OpenBLAS alone on the "
        "same GEMM shapes %.1f GFLOP/s; engine reaches %.0f%% of it\n",
        a.mode.c_str(), a.tokens, past, a.threads, tps, flops / (e_ms * 1e6), flops / (f_ms * 1e6),
        100.0 * f_ms / e_ms);
    if (floor.partial)
      std::printf(
          "(the floor covers the dense matrices only: MoE experts and MLA projections are "
          "not in it, and the FLOP counts assume a dense FFN)\n");
  }
  return 0;
}

// A chunk of a.tokens behind an antecedent of a.antecedent (random ids), on the model's real
// shapes.
int run_bench_serve(const BenchArgs& a) {
  auto loaded = load_for_cli(a.model, "");
  if (!loaded.ok()) return fail(loaded.message(), a.json);
  const Model& m = **loaded;
  const ModelConfig& c = m.cfg;
  if (a.tokens < 1 || a.antecedent < 1 || a.reps < 1)
    return fail("--tokens, --antecedent, --reps must be >= 1", a.json);
  if (1 + a.antecedent + a.tokens > c.ctx_len)
    return fail("antecedent + chunk exceed the model's context", a.json);
  std::mt19937 rng(uint32_t(a.seed));
  auto random_chunk = [&](int n) {
    std::vector<int32_t> ids(n);
    for (auto& t : ids) t = int32_t(3 + rng() % uint32_t(c.n_vocab - 3));
    return ChunkContent::from_tokens(std::move(ids));
  };
  const ChunkContent A = random_chunk(a.antecedent), B = random_chunk(a.tokens);
  ContextOptions co;
  co.kv_type = kv_type_option();
  co.n_threads = a.threads;
  co.kv_tokens = 6 * (1 + a.antecedent + a.tokens + 32);
  co.store_bytes = size_t(1) << 36;
  auto ctx = Context::create(*loaded, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  KvPool& kv = (*ctx)->pool();
  ChunkCache& cc = (*ctx)->cache();
  const int32_t pB = 1 + A.extent();

  ScopedSequence prefix(kv);
  if (auto st = cc.append_anchor(prefix.id()); !st.ok()) return fail(st.message(), a.json);
  if (auto r = cc.forward_chunk(prefix.id(), A, 1); !r.ok()) return fail(r.message(), a.json);
  const double tc0 = now_ms();
  auto canon = cc.canonical(B);
  const double canon_ms = now_ms() - tc0;
  if (!canon.ok()) return fail(canon.message(), a.json);
  PatchOptions po;
  po.rank = a.rank;
  po.cap_rank = true;  // capped at min(tokens, width) of each (layer, channel)
  po.head_dim = c.head_dim;
  po.dtype = co.kv_type;  // factors stored at the pool's width, as ChunkCache stores them
  po.method = a.svd == "gesdd"        ? SvdMethod::Gesdd
              : a.svd == "randomized" ? SvdMethod::Randomized
                                      : SvdMethod::Auto;

  std::vector<double> t_reprefill, t_serve, t_blind, t_floor, t_cond, t_svd;
  std::shared_ptr<Patch> patch;
  for (int rep = 0; rep <= a.reps; ++rep) {  // rep 0 is the warm-up
    // re-prefill of the chunk behind the cached prefix
    auto f1 = kv.fork(prefix.id());
    if (!f1.ok()) return fail(f1.message(), a.json);
    double t0 = now_ms();
    if (auto r = cc.forward_chunk(*f1, B, pB); !r.ok()) return fail(r.message(), a.json);
    const double reprefill = now_ms() - t0;
    kv.free_sequence(*f1);
    // compile: the conditioned forward, then the factorization
    t0 = now_ms();
    const std::vector<ChunkContent> ab = {A, B};
    auto cond = cc.conditioned(ab);
    if (!cond.ok()) return fail(cond.message(), a.json);
    const double cond_ms = now_ms() - t0;
    t0 = now_ms();
    auto p = form_patch(cond->back(), (*canon)->kv, po);
    if (!p.ok()) return fail(p.message(), a.json);
    const double svd_ms = now_ms() - t0;
    patch = std::make_shared<Patch>(std::move(p.value()));
    // serve: canonical + patch written into the pool, zero forwards
    auto f2 = kv.fork(prefix.id());
    t0 = now_ms();
    if (auto st = cc.append_chunk(*f2, **canon, patch.get(), pB); !st.ok())
      return fail(st.message(), a.json);
    const double serve = now_ms() - t0;
    kv.free_sequence(*f2);
    auto f3 = kv.fork(prefix.id());
    t0 = now_ms();
    if (auto st = cc.append_chunk(*f3, **canon, nullptr, pB); !st.ok())
      return fail(st.message(), a.json);
    const double blind = now_ms() - t0;
    kv.free_sequence(*f3);
    // floor: memcpy of the same bytes + the patch GEMMs alone, at BLAS speed
    // (stored bytes in the pool's dtype; factors widened to f32 beforehand, outside the timing)
    const ChunkKV& ck = (*canon)->kv;
    std::vector<float> dst(size_t(B.n()) * c.kv_width()), prod(size_t(B.n()) * c.kv_width());
    std::vector<std::vector<float>> fus, fvt;
    for (const auto& f : patch->factors) {
      fus.emplace_back(size_t(f.rows) * f.rank);
      fvt.emplace_back(size_t(f.rank) * f.cols);
      for (int i = 0; i < f.rows; ++i) f.us.get_row(i, fus.back().data() + size_t(i) * f.rank);
      for (int j = 0; j < f.rank; ++j) f.vt.get_row(j, fvt.back().data() + size_t(j) * f.cols);
    }
    t0 = now_ms();
    for (const auto& blk : ck.blocks) std::memcpy(dst.data(), blk.raw(), blk.bytes());
    for (size_t i = 0; i < patch->factors.size(); ++i) {
      const auto& f = patch->factors[i];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, f.rows, f.cols, f.rank, 1.0f,
                  fus[i].data(), f.rank, fvt[i].data(), f.cols, 0.0f, prod.data(), f.cols);
    }
    const double floor = now_ms() - t0;
    if (rep == 0) continue;
    t_reprefill.push_back(reprefill);
    t_serve.push_back(serve);
    t_blind.push_back(blind);
    t_floor.push_back(floor);
    t_cond.push_back(cond_ms);
    t_svd.push_back(svd_ms);
    if (!a.json)
      std::fprintf(stderr,
                   "kamera: bench serve rep %d/%d: reprefill %.1f ms, serve %.3f ms, floor %.3f "
                   "ms, compile %.1f + %.1f ms\n",
                   rep, a.reps, reprefill, serve, floor, cond_ms, svd_ms);
  }
  const double rp = median(t_reprefill), sv = median(t_serve), bl = median(t_blind),
               fl = median(t_floor), cd = median(t_cond), sd = median(t_svd);
  const size_t kv_bytes = (*canon)->kv.bytes();
  json j{{"mode", "serve"},
         {"model", model_summary(m)},
         {"system", system_info(&m)},
         {"threads", a.threads},
         {"blas_path", blas_path()},
         {"chunk_tokens", a.tokens},
         {"antecedent_tokens", a.antecedent},
         {"rank", po.rank},
         {"kv_type", dtype_name(co.kv_type)},
         {"svd", a.svd},
         {"reps", a.reps},
         {"chunk_kv_bytes", kv_bytes},
         {"patch_bytes", patch->bytes()},
         {"reprefill_ms", rp},
         {"serve_ms", sv},
         {"serve_blind_ms", bl},
         {"floor_memcpy_gemm_ms", fl},
         {"speedup_vs_reprefill", rp / sv},
         {"serve_over_floor", sv / fl},
         {"canonical_form_ms", canon_ms},
         {"compile_forward_ms", cd},
         {"compile_svd_ms", sd},
         {"compile_overhead_beyond_forward", sd / cd}};
  if (a.json) {
    print_json(j, 2);
  } else {
    std::printf(
        "serve chunk of %d tokens behind %d, rank %d, %d threads: re-prefill %.1f ms, serve %.3f "
        "ms "
        "(%.0fx faster), %.2fx the memcpy+GEMM floor (%.3f ms); compile = forward %.1f ms + "
        "factorization %.1f ms (+%.1f%%)\n",
        a.tokens, a.antecedent, po.rank, a.threads, rp, sv, rp / sv, sv / fl, fl, cd, sd,
        100.0 * sd / cd);
  }
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("mode", a->mode,
                 "prefill | decode | serve (a cached chunk of --tokens behind --antecedent tokens: "
                 "serve with a rank --rank patch vs re-prefill, vs the memcpy+GEMM floor, and the "
                 "patch compile cost vs its forward) | gemm (the engine's f32 GEMM shapes on each "
                 "OpenBLAS kernel table the CPU runs; -m optional, default the 0.5b shapes)")
      ->required()
      ->check(CLI::IsMember({"prefill", "decode", "serve", "gemm"}));
  add_model_option(app, a->model);
  app.get_option("--model")->required(false);  // bench gemm runs without a model
  app.add_option("--tokens", a->tokens, "prefill: prompt length; decode: tokens generated")
      ->capture_default_str();
  app.add_option("--antecedent", a->antecedent, "serve: tokens before the chunk")
      ->capture_default_str();
  app.add_option("--rank", a->rank, "serve: patch rank")->capture_default_str();
  app.add_option("--svd", a->svd, "serve: auto, gesdd or randomized")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "gesdd", "randomized"}));
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
