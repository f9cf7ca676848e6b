#include "tools/bench_gemm.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

#include "core/clock.h"
#include "core/cpu_features.h"
#include "eval/metrics.h"
#include "ops/blas_select.h"
#include "ops/gemm.h"
#include "synthetic/synthetic_model.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

// One product as the engine issues it: C[M x N] = op(A) op(B), row strides as stored.
struct Shape {
  std::string name, group;  // group "prefill" / "decode": summed into one layer row
  int M, N, K;
  Trans tb;
  int lda, ldb, ldc;
};

std::vector<Shape> engine_shapes(const ModelConfig& c, int T) {
  const int d = c.dim, qw = c.q_width(), kvw = c.kv_width(), h = c.ffn_dim, hd = c.head_dim;
  const Trans y = Trans::Yes, n = Trans::No;
  std::vector<Shape> s;
  for (auto [group, M] : {std::pair<const char*, int>{"prefill", T}, {"decode", 1}}) {
    s.push_back({"wq", group, M, qw, d, y, d, d, qw});
    s.push_back({"wk", group, M, kvw, d, y, d, d, kvw});
    s.push_back({"wv", group, M, kvw, d, y, d, d, kvw});
    s.push_back({"wo", group, M, d, qw, y, qw, qw, d});
    s.push_back({"w_gate", group, M, h, d, y, d, d, h});
    s.push_back({"w_up", group, M, h, d, y, d, d, h});
    s.push_back({"w_down", group, M, d, h, y, h, h, d});
  }
  s.push_back({"lm_head", "", 1, c.n_vocab, d, y, d, d, c.n_vocab});
  const int rows = std::min(T, 256);  // ops/attention.cpp's query block
  s.push_back({"attn Q K^T", "", rows, T, hd, y, qw, kvw, T});
  s.push_back({"attn P V", "", rows, hd, T, n, T, kvw, qw});
  for (int m : {8, 16, 32, 64})
    s.push_back({fmt::format("patch U V^T m={}", m), "", T, kvw, m, n, m, kvw, kvw});
  return s;
}

// The kernel tables compared: every one of Prescott/Haswell/SkylakeX the CPU runs, plus the
// ones OpenBLAS chose at load (e.g. Zen) and kamera selected, if they are others. A build that is
// not DYNAMIC_ARCH has one table: it is timed alone.
std::vector<std::string> runnable_cores(const BlasInfo& info) {
  if (!info.selectable) return {info.core};  // one table only: timed as it is
  std::vector<std::string> cores;
  for (const char* c : {"Prescott", "Haswell", "SkylakeX"})
    if (openblas_core_level(c) <= cpu_isa_level()) cores.push_back(c);
  for (const std::string& c : {info.loaded_core, info.core})
    if (std::find(cores.begin(), cores.end(), c) == cores.end()) cores.push_back(c);
  return cores;
}

// Per core: median and best wall ms, and median CPU ms of this thread (with one BLAS thread the
// product runs here, so this time does not count the waits of a busy shared machine).
struct Timing {
  double median_ms, min_ms, cpu_ms;
};

// Each core on one shape, interleaved: rep 1 of every core, then rep 2, ...
Result<std::vector<Timing>> time_shape(const Shape& s, const std::vector<std::string>& cores,
                                       int reps, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A(size_t(s.M) * s.lda), B(size_t(s.tb == Trans::Yes ? s.N : s.K) * s.ldb),
      C(size_t(s.M) * s.ldc);
  for (auto& x : A) x = u(rng);
  for (auto& x : B) x = u(rng);
  std::vector<std::vector<double>> wall(cores.size()), cpu(cores.size());
  for (int r = -1; r < reps; ++r)  // r == -1: warm-up
    for (size_t c = 0; c < cores.size(); ++c) {
      if (cores.size() > 1) KAMERA_TRY(set_blas_core(cores[c]));
      const double t0 = now_ms(), c0 = thread_cpu_ms();
      gemm(Trans::No, s.tb, s.M, s.N, s.K, 1.0f, A.data(), s.lda, B.data(), s.ldb, 0.0f, C.data(),
           s.ldc);
      if (r < 0) continue;
      cpu[c].push_back(thread_cpu_ms() - c0);
      wall[c].push_back(now_ms() - t0);
    }
  std::vector<Timing> out;
  for (size_t c = 0; c < cores.size(); ++c)
    out.push_back(
        {median(wall[c]), *std::min_element(wall[c].begin(), wall[c].end()), median(cpu[c])});
  return out;
}

// One row per layer group: the per-core sums, and the selected core's gain over OpenBLAS's own.
json layer_summary(const std::map<std::string, std::vector<double>>& layer_ms,
                   const std::map<std::string, double>& layer_flop,
                   const std::vector<std::string>& cores, const BlasInfo& info,
                   const GemmBenchArgs& a) {
  const auto at = [&](const std::string& core) {
    return size_t(std::find(cores.begin(), cores.end(), core) - cores.begin());
  };
  json layers = json::object();
  for (const auto& [group, ms] : layer_ms) {
    json per_core = json::object();
    for (size_t c = 0; c < cores.size(); ++c)
      per_core[cores[c]] = {{"ms", ms[c]}, {"gflops", layer_flop.at(group) / (ms[c] * 1e6)}};
    const double gain = ms[at(info.loaded_core)] / ms[at(info.core)];
    layers[group] = {{"cores", per_core},
                     {"timer", a.threads == 1 ? "thread_cpu" : "wall"},
                     {"selected_over_loaded", gain}};
    if (!a.json)
      std::printf(
          "one %s layer (%s): %s %.2f ms (selected) vs %s %.2f ms (OpenBLAS's own): %.2fx\n",
          group.c_str(), group == "prefill" ? fmt::format("M = {}", a.tokens).c_str() : "M = 1",
          info.core.c_str(), ms[at(info.core)], info.loaded_core.c_str(), ms[at(info.loaded_core)],
          gain);
  }
  return layers;
}

}  // namespace

int run_bench_gemm(const GemmBenchArgs& a) {
  if (a.tokens < 1 || a.reps < 1) return fail("--tokens and --reps must be >= 1", a.json);
  ModelConfig cfg = *synthetic_preset(Arch::Qwen2, "0.5b");
  if (!a.model.empty()) {
    auto loaded = load_for_cli(a.model, "");
    if (!loaded.ok()) return fail(loaded.message(), a.json);
    cfg = (*loaded)->cfg;
  }
  const BlasInfo info = blas_info();
  set_blas_threads(a.threads);
  const std::vector<std::string> cores = runnable_cores(info);
  std::mt19937 rng(1);
  json rows = json::array();
  // group -> per-core sum of medians (thread CPU time with one thread, else wall time)
  std::map<std::string, std::vector<double>> layer_ms;
  std::map<std::string, double> layer_flop;
  for (const Shape& s : engine_shapes(cfg, a.tokens)) {
    auto med = time_shape(s, cores, a.reps, rng);
    if (!med.ok()) return fail(med.message(), a.json);
    const double flop = 2.0 * s.M * s.N * s.K;
    json per_core = json::object();
    std::string line = fmt::format("{:<18} {:>5} x {:>6} x {:>5}", s.name, s.M, s.N, s.K);
    for (size_t c = 0; c < cores.size(); ++c) {
      const Timing& t = (*med)[c];
      per_core[cores[c]] = {
          {"ms_median", t.median_ms}, {"ms_min", t.min_ms}, {"gflops", flop / (t.median_ms * 1e6)}};
      if (a.threads == 1) per_core[cores[c]]["cpu_ms_median"] = t.cpu_ms;
      line += fmt::format(" | {} {:.3f} ms {:.1f} GF/s", cores[c], t.median_ms,
                          flop / (t.median_ms * 1e6));
      if (a.threads == 1) line += fmt::format(" (cpu {:.1f})", flop / (t.cpu_ms * 1e6));
    }
    if (!s.group.empty()) {
      auto& sum = layer_ms[s.group];
      sum.resize(cores.size());
      for (size_t c = 0; c < cores.size(); ++c)
        sum[c] += a.threads == 1 ? (*med)[c].cpu_ms : (*med)[c].median_ms;
      layer_flop[s.group] += flop;
    }
    rows.push_back({{"shape", s.name}, {"M", s.M}, {"N", s.N}, {"K", s.K}, {"cores", per_core}});
    if (!a.json) std::printf("%s\n", line.c_str());
  }
  if (cores.size() > 1) KAMERA_ASSERT(set_blas_core(info.core).ok());  // back to kamera's choice
  const json layers = layer_summary(layer_ms, layer_flop, cores, info, a);
  json j{{"mode", "gemm"},
         {"threads", a.threads},
         {"tokens", a.tokens},
         {"reps", a.reps},
         {"cpu_features", cpu_feature_string()},
         {"isa_level", isa_level_name(isa_level())},
         {"blas_path", blas_path()},
         {"loaded_core", info.loaded_core},
         {"selected_core", info.core},
         {"layers", layers},
         {"shapes", rows},
         {"system", system_info(nullptr)}};
  if (a.json) {
    print_json(j, 2);
  } else {
    std::printf("%d threads, %d reps (medians, interleaved); CPU: %s; %s\n", a.threads, a.reps,
                cpu_feature_string().c_str(), blas_path().c_str());
  }
  return 0;
}

}  // namespace kamera::cli
