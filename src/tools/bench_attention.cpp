#include "tools/bench_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/clock.h"
#include "core/thread_pool.h"
#include "eval/metrics.h"
#include "kv/kv_row.h"
#include "ops/attention.h"
#include "ops/attention_split.h"
#include "synthetic/synthetic_model.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

// Values in [-1, 1) from a xorshift generator (cheap: a 16384-deep cache is 10^8 values).
void fill_uniform(std::vector<float>& v, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    f = float(x >> 40) * (2.0f / float(1 << 24)) - 1.0f;
  }
}

// One layer: its arenas (rows stored as the KV type) and its query.
struct Layer {
  std::vector<uint8_t> k, v;
  std::vector<float> q;
};

std::vector<Layer> make_layers(const ModelConfig& c, int N, DType dt) {
  const size_t kv_floats = size_t(N) * c.n_kv_heads * c.head_dim;
  std::vector<Layer> layers(size_t(c.n_layers));
  std::vector<float> tmp(kv_floats);
  uint64_t seed = 1;
  for (Layer& l : layers) {
    for (auto* arena : {&l.k, &l.v}) {
      fill_uniform(tmp, seed++);
      arena->resize(kv_floats * kv_elem_bytes(dt));
      kv_store_row(dt, tmp.data(), arena->data(), int64_t(kv_floats));
    }
    l.q.resize(size_t(c.n_heads) * c.head_dim);
    fill_uniform(l.q, seed++);
  }
  return layers;
}

// Per path: the step times, and the last step's outputs (layers x n_heads x head_dim).
struct PathRun {
  std::vector<double> ms;
  std::vector<float> out;
};

// The inputs every step shares: the shape, the cache's slots and positions, the rope table.
struct Step {
  const ModelConfig& c;
  const std::vector<Layer>& layers;
  std::vector<int32_t> slots;
  std::vector<Pos> positions;
  RopeCache rope;
  ThreadPool pool;
  AttentionWorkspace ws;
  DType dt;

  Step(const ModelConfig& cfg, const std::vector<Layer>& l, int N, int threads, DType kv)
      : c(cfg),
        layers(l),
        slots(size_t(N)),
        positions(size_t(N)),
        rope(cfg.rope, N + 1),
        pool(threads),
        dt(kv) {
    std::iota(slots.begin(), slots.end(), 0);
    for (int j = 0; j < N; ++j) positions[size_t(j)] = Pos::linear(j);
  }

  // One decode step's attention (every layer's call) on one path; returns its milliseconds
  // (thread CPU time with one thread, else wall time).
  double run(bool split, std::vector<float>& out) {
    const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};
    const size_t qw = size_t(c.n_heads) * c.head_dim;
    out.resize(layers.size() * qw);
    AttentionExtras ex;
    ex.kv_dtype = dt;
    ex.split = split;
    const int N = int(slots.size());
    const double t0 = pool.size() == 1 ? thread_cpu_ms() : now_ms();
    for (size_t l = 0; l < layers.size(); ++l)
      attention_paged(shape, layers[l].q.data(), 1, N - 1, layers[l].k.data(), layers[l].v.data(),
                      slots, positions, rope, nullptr, &out[l * qw], pool, ws, ex);
    return (pool.size() == 1 ? thread_cpu_ms() : now_ms()) - t0;
  }
};

// The largest |x - y| over the largest |y|.
double relative_gap(const std::vector<float>& x, const std::vector<float>& y) {
  double gap = 0, top = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    gap = std::max(gap, std::fabs(double(x[i]) - y[i]));
    top = std::max(top, std::fabs(double(y[i])));
  }
  return top > 0 ? gap / top : gap;
}

void report(const AttentionBenchArgs& a, const ModelConfig& c, const PathRun& split,
            const PathRun& per_head) {
  const double ms_split = median(split.ms), ms_head = median(per_head.ms);
  const double gap = relative_gap(split.out, per_head.out);
  const bool agree = gap < 1e-4;
  const char* timer = a.threads == 1 ? "thread_cpu" : "wall";
  if (!a.json) {
    std::printf("attention of one decode step: %d layers, %d/%d heads of %d, %d keys, %s KV\n",
                c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, a.ctx,
                std::string(dtype_name(a.kv_type)).c_str());
    std::printf("split %.2f ms/step | per-head %.2f ms/step | speed-up %.2fx (%s, median of %d)\n",
                ms_split, ms_head, ms_head / ms_split, timer, a.reps);
    std::printf("outputs agree: %s (largest gap %.2e of the largest output)\n",
                agree ? "yes" : "NO", gap);
    return;
  }
  print_json({{"mode", "attention"},
              {"layers", c.n_layers},
              {"n_heads", c.n_heads},
              {"n_kv_heads", c.n_kv_heads},
              {"head_dim", c.head_dim},
              {"keys", a.ctx},
              {"kv_type", dtype_name(a.kv_type)},
              {"threads", a.threads},
              {"reps", a.reps},
              {"timer", timer},
              {"split_taken", a.ctx >= kSplitMinKeys},
              {"split_ms_median", ms_split},
              {"per_head_ms_median", ms_head},
              {"speedup", ms_head / ms_split},
              {"split_ms_all", split.ms},
              {"per_head_ms_all", per_head.ms},
              {"first_output", {{"split", split.out[0]}, {"per_head", per_head.out[0]}}},
              {"relative_gap", gap},
              {"outputs_agree", agree},
              {"system", system_info(nullptr)}},
             2);
}

}  // namespace

int run_bench_attention(const AttentionBenchArgs& a) {
  if (a.ctx < 1 || a.reps < 1 || a.threads < 1)
    return fail("bench attention: --ctx, --reps and -t must be >= 1", a.json);
  ModelConfig cfg = *synthetic_preset(Arch::Qwen2, "0.5b");
  if (!a.model.empty()) {
    auto loaded = load_for_cli(a.model, "");
    if (!loaded.ok()) return fail(loaded.message(), a.json);
    cfg = (*loaded)->cfg;
  }
  const std::vector<Layer> layers = make_layers(cfg, a.ctx, a.kv_type);
  Step step(cfg, layers, a.ctx, a.threads, a.kv_type);
  PathRun split, per_head;
  for (int r = -1; r < a.reps; ++r) {  // r == -1: warm-up; the paths alternate
    const double s = step.run(true, split.out), h = step.run(false, per_head.out);
    if (r < 0) continue;
    split.ms.push_back(s);
    per_head.ms.push_back(h);
  }
  report(a, cfg, split, per_head);
  return 0;
}

}  // namespace kamera::cli
