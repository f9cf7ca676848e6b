// kamera bench prefill|decode: engine speed, and OpenBLAS alone on the same GEMM shapes in the
// same run, so the reported number is a ratio (engine time vs the BLAS floor). The modes serve
// (bench_serve.h), grammar (bench_grammar.h), gemm (bench_gemm.h) and attention
// (bench_attention.h) have files of their own.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "core/thread_pool.h"
#include "eval/metrics.h"
#include "model/forward.h"
#include "ops/gemm.h"
#include "tools/bench_attention.h"
#include "tools/bench_bandwidth.h"
#include "tools/bench_gemm.h"
#include "tools/bench_grammar.h"
#include "tools/bench_serve.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct BenchArgs {
  std::string mode, model;
  int tokens = 512, ctx = 64, reps = 5, threads = default_threads();
  int antecedent = 256, rank = 32;  // serve (bench_serve.h)
  std::string schema;               // grammar (bench_grammar.h)
  float temp = 1.0f;
  std::string svd = "auto";
  uint64_t seed = 1;
  bool json = false;
  bool no_floor = false;  // prefill, decode: the engine alone (profiles; no OpenBLAS run between)
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

// The engine and the BLAS floor on the same random prompt: prefill runs `tokens` tokens in one
// forward; decode runs `past` tokens, then times `tokens` one-token forwards.
struct EngineBench {
  const BenchArgs& a;
  Engine& engine;
  KvPool& pool;
  GemmFloor& floor;
  const WeightStreamProbe& stream;  // decode: the weights' read floor
  int past = 0, total = 0;
  ThreadPool::Stats last_pool;  // decode: the pool's jobs during the last timed run
  std::vector<int32_t> ids;
  std::vector<Pos> pos;

  EngineBench(const BenchArgs& args, Engine& e, KvPool& p, GemmFloor& f, const WeightStreamProbe& s,
              int n_vocab)
      : a(args), engine(e), pool(p), floor(f), stream(s) {
    past = a.mode == "prefill" ? 0 : a.ctx;
    total = past + a.tokens;
    std::mt19937 rng(uint32_t(a.seed));
    ids.resize(total);
    for (auto& t : ids) t = int32_t(rng() % uint32_t(n_vocab));
    pos.resize(total);
    for (int i = 0; i < total; ++i) pos[i] = Pos::linear(i);
  }

  // The engine's timed part (ms), on a fresh sequence.
  Result<double> run_engine() {
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
      engine.threads().reset_stats();
      const double t0 = now_ms();
      for (int i = past; i < total; ++i) {
        l = engine.forward(pool, seq, ForwardInput::from_tokens({&ids[i], 1}, {&pos[i], 1}));
        if (!l.ok()) return l.error();
      }
      ms = now_ms() - t0;
      last_pool = engine.threads().stats();
    }
    pool.free_sequence(seq);
    return ms;
  }

  // The same GEMMs on OpenBLAS alone (ms).
  double run_floor() {
    const double t0 = now_ms();
    if (a.mode == "prefill") {
      floor.run(a.tokens, 0);
    } else {
      for (int i = past; i < total; ++i) floor.run(1, i);
    }
    return now_ms() - t0;
  }

  // Multiply-adds x2 of the timed part.
  double flops(const ModelConfig& c) const {
    if (a.mode == "prefill") return forward_flops(c, a.tokens, 0);
    double f = 0;
    for (int i = past; i < total; ++i) f += forward_flops(c, 1, i);
    return f;
  }
};

struct RepTimes {
  std::vector<double> eng, flo;
  ThreadPool::Stats pool;    // decode: summed over the timed runs
  std::vector<double> read;  // decode: ms to read the weights once (the fastest counts)
};

// Warm-up, then alternate engine, floor and (decode) weight-read runs so all see the same
// machine state.
Status alternate_reps(EngineBench& b, RepTimes* t) {
  const bool floor = !b.a.no_floor;
  if (auto w = b.run_engine(); !w.ok()) return w.error();
  if (floor) b.run_floor();
  const bool decode = b.a.mode == "decode";
  for (int r = 0; r < b.a.reps; ++r) {
    KAMERA_ASSIGN_OR_RETURN(const double e, b.run_engine());
    t->eng.push_back(e);
    t->pool.jobs += b.last_pool.jobs;
    t->pool.job_ms += b.last_pool.job_ms;
    t->pool.tail_ms += b.last_pool.tail_ms;
    if (floor) t->flo.push_back(b.run_floor());
    if (decode)
      for (int i = 0; i < 3; ++i) t->read.push_back(b.stream.read_once(b.floor.pool));
    if (!b.a.json)
      std::fprintf(stderr, "kamera: bench rep %d/%d: engine %.1f ms, BLAS floor %.1f ms\n", r + 1,
                   b.a.reps, e, floor ? t->flo.back() : 0.0);
  }
  return Status::Ok();
}

// Decode's read floor: the fastest read of the weights, as tok/s and as the engine's share.
struct ReadFloor {
  double bytes = 0, ms = 0, gbs = 0, tps = 0, share = 0;
};

ReadFloor read_floor(const EngineBench& b, const RepTimes& t, double engine_tps) {
  ReadFloor f;
  if (t.read.empty()) return f;
  f.bytes = b.stream.bytes_per_token();
  f.ms = *std::min_element(t.read.begin(), t.read.end());
  f.gbs = gb_per_s(f.bytes, f.ms);
  f.tps = f.ms > 0 ? 1e3 / f.ms : 0.0;
  f.share = f.tps > 0 ? engine_tps / f.tps : 0.0;
  return f;
}

void report_engine_bench(const EngineBench& b, const Model& m, const RepTimes& t) {
  const BenchArgs& a = b.a;
  const std::vector<double>&eng = t.eng, &flo = t.flo;
  const double e_ms = median(eng), f_ms = median(flo), flops = b.flops(m.cfg);
  const double tps = a.tokens / (e_ms / 1e3);
  const ReadFloor rf = read_floor(b, t, tps);
  if (!a.json) {
    std::printf("%s %d tokens (after %d), %d threads: %.1f tok/s, %.1f GFLOP/s", a.mode.c_str(),
                a.tokens, b.past, a.threads, tps, flops / (e_ms * 1e6));
    if (flo.empty()) {
      std::printf(" (--no-floor: no OpenBLAS run)\n");
    } else {
      std::printf(
          "; OpenBLAS alone on the same GEMM shapes %.1f GFLOP/s; engine reaches %.0f%% of it\n",
          flops / (f_ms * 1e6), 100.0 * f_ms / e_ms);
    }
    if (!t.read.empty())
      std::printf(
          "read floor: %.1f MB of weights per token, read at %.1f GB/s (fastest of %zu reads, "
          "%d threads): %.1f tok/s; engine at %.2f of the floor\n",
          rf.bytes / 1e6, rf.gbs, t.read.size(), a.threads, rf.tps, rf.share);
    if (a.mode == "decode" && t.pool.jobs > 0) {
      const double steps = double(a.tokens) * double(eng.size());
      std::printf("pool: %.1f jobs per token, %.2f ms of %.2f in jobs, %.2f ms in their tails\n",
                  double(t.pool.jobs) / steps, t.pool.job_ms / steps, e_ms / a.tokens,
                  t.pool.tail_ms / steps);
    }
    if (b.floor.partial)
      std::printf(
          "(the floor covers the dense matrices only: MoE experts and MLA projections are "
          "not in it, and the FLOP counts assume a dense FFN)\n");
    return;
  }
  json out{{"mode", a.mode},
           {"model", model_summary(m)},
           {"system", system_info(&m)},
           {"threads", a.threads},
           {"blas_path", blas_path()},
           {"tokens", a.tokens},
           {"context_before", b.past},
           {"kv_type", dtype_name(b.pool.dtype())},
           {"reps", a.reps},
           {"engine_ms_median", e_ms},
           {"blas_floor_ms_median", f_ms},
           {"tokens_per_s", tps},
           {"engine_gflops", flops / (e_ms * 1e6)},
           {"blas_floor_gflops", flops / (f_ms * 1e6)},
           {"share_of_blas", f_ms / e_ms},
           {"engine_ms_all", eng},
           {"blas_floor_ms_all", flo},
           {"blas_floor_dense_only", b.floor.partial}};
  if (!t.read.empty())
    out["read_floor"] = {{"weight_bytes_per_token", rf.bytes},
                         {"read_ms_min", rf.ms},
                         {"read_gb_per_s", rf.gbs},
                         {"floor_tokens_per_s", rf.tps},
                         {"share_of_floor", rf.share},
                         {"read_ms_all", t.read}};
  if (a.mode == "decode") {  // the pool's hand-offs per decoded token (core/thread_pool.h)
    const double steps = double(a.tokens) * double(eng.size()),
                 all_ms = std::accumulate(eng.begin(), eng.end(), 0.0);
    out["pool"] = {{"jobs_per_token", double(t.pool.jobs) / steps},
                   {"job_ms_per_token", t.pool.job_ms / steps},
                   {"tail_ms_per_token", t.pool.tail_ms / steps},
                   {"share_in_jobs", t.pool.job_ms / all_ms},
                   {"share_in_tails", t.pool.tail_ms / all_ms}};
  }
  print_json(out, 2);
}

int run_bench(const BenchArgs& a) {
  if (a.mode == "gemm") return run_bench_gemm({a.model, a.tokens, a.reps, a.threads, a.json});
  if (a.mode == "attention")
    return run_bench_attention({a.model, a.ctx, a.reps, a.threads, kv_type_option(), a.json});
  if (a.model.empty()) return fail("bench " + a.mode + " needs -m/--model", a.json);
  if (a.mode == "grammar")
    return run_bench_grammar({.model = a.model,
                              .schema = a.schema,
                              .tokens = a.tokens,
                              .threads = a.threads,
                              .temperature = a.temp,
                              .seed = a.seed,
                              .json = a.json});
  if (a.mode == "serve")
    return run_bench_serve({.model = a.model,
                            .tokens = a.tokens,
                            .antecedent = a.antecedent,
                            .rank = a.rank,
                            .reps = a.reps,
                            .threads = a.threads,
                            .svd = a.svd,
                            .seed = a.seed,
                            .json = a.json});
  if (a.mode != "prefill" && a.mode != "decode")
    return fail(
        fmt::format(
            "bench mode must be prefill, decode, serve, grammar, gemm or attention, not '{}'",
            a.mode),
        a.json);
  auto loaded = load_for_cli(a.model, "");
  if (!loaded.ok()) return fail(loaded.message(), a.json);
  const Model& m = **loaded;
  if (a.tokens < 1 || a.reps < 1) return fail("--tokens and --reps must be >= 1", a.json);
  const int past = a.mode == "prefill" ? 0 : a.ctx;
  auto ctx = context_for(*loaded, a.threads, past + a.tokens);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  GemmFloor floor(m, a.threads);
  const WeightStreamProbe stream(m);
  EngineBench b(a, (*ctx)->engine(), (*ctx)->pool(), floor, stream, m.cfg.n_vocab);
  RepTimes t;
  if (auto st = alternate_reps(b, &t); !st.ok()) return fail(st.message(), a.json);
  report_engine_bench(b, m, t);
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option(
         "mode", a->mode,
         "prefill | decode | serve (a cached chunk of --tokens behind --antecedent tokens: "
         "serve with a rank --rank patch vs re-prefill, vs the memcpy+GEMM floor, and the "
         "patch compile cost vs its forward) | gemm (the engine's f32 GEMM shapes on each "
         "OpenBLAS kernel table the CPU runs; -m optional, default the 0.5b shapes) | grammar "
         "(constrained decoding under --schema, or any JSON object: the constraint's "
         "cost per token next to the forward's) | attention (one decode step's attention alone "
         "over --ctx cached keys per layer: the split over the keys vs the per-head path, "
         "alternated, outputs compared; -m optional, default the 0.5b shape)")
      ->required()
      ->check(CLI::IsMember({"prefill", "decode", "serve", "gemm", "grammar", "attention"}));
  add_model_option(app, a->model);
  app.get_option("--model")->required(false);  // bench gemm and attention run without a model
  app.add_option("--tokens", a->tokens, "prefill: prompt length; decode, grammar: tokens generated")
      ->capture_default_str();
  app.add_option("--antecedent", a->antecedent, "serve: tokens before the chunk")
      ->capture_default_str();
  app.add_option("--rank", a->rank, "serve: patch rank")->capture_default_str();
  app.add_option("--schema", a->schema, "grammar: a JSON Schema file (default: any JSON object)")
      ->check(CLI::ExistingFile);
  app.add_option("--temp", a->temp, "grammar: sampling temperature")->capture_default_str();
  app.add_option("--svd", a->svd, "serve: auto, gesdd or randomized")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "gesdd", "randomized"}));
  app.add_option("--ctx", a->ctx,
                 "decode: tokens already in the cache before timing; attention: keys per layer")
      ->capture_default_str();
  app.add_option("--reps", a->reps, "Timed repetitions after one warm-up (median reported)")
      ->capture_default_str();
  add_threads_option(app, a->threads);
  app.add_option("--seed", a->seed, "Seed of the random token ids")->capture_default_str();
  app.add_flag("--json", a->json, "Print a JSON object");
  app.add_flag("--no-floor", a->no_floor,
               "prefill, decode: time the engine alone, with no OpenBLAS floor run between its "
               "runs (its fields are then null; for profiles)");
  return [a] { return run_bench(*a); };
}

}  // namespace kamera::cli
