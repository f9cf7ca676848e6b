// kamera quant-bench: GFLOP/s of the quantized-weight matmul (ops/quant.h) per weight type,
// layer shape, activation rows and kernel path, on random weights of each type. A benchmark,
// not a test: it prints numbers with the CPU's features; ratios against llama.cpp are made from
// llama-bench runs on the same machine (docs/BENCHMARKS.md).
#include <sys/mman.h>
#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

#include "../tests/support/quant_data.h"
#include "core/clock.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "ops/quant.h"
#include "ops/quant_kernels.h"
#include "ops/quant_repack.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct QuantBenchArgs {
  std::string types = "f16,q8_0,q5_0,q4_K,q6_K";
  std::string shapes = "896x896,128x896,4864x896,896x4864,151936x896";
  std::string rows = "1,512";
  int threads = default_threads(), reps = 3;
  std::string gguf;
  bool all_paths = false, cpu_time = false, copy = false, repacked = false, json = false;
};

// Milliseconds of wall time, or of this thread's CPU time (--cpu-time, single thread: on a
// machine shared with other jobs it leaves out the time the thread was not running).
double clock_ms(bool cpu_time) {
  return cpu_time ? thread_cpu_ms() : now_ms();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::optional<GgmlType> type_by_name(const std::string& name) {
  for (GgmlType t : weight_types()) {
    std::string a = ggml_type_name(t), b = name;
    std::transform(a.begin(), a.end(), a.begin(), ::tolower);
    std::transform(b.begin(), b.end(), b.begin(), ::tolower);
    if (a == b) return t;
  }
  return std::nullopt;
}

// Every matrix product of one forward of n tokens through a GGUF file's weights, in their file
// types (the 2-D ".weight" tensors, and token_embd again as the output head when the file ties
// it): the matmul-only time of a forward, to set beside llama-bench on the same file.
int run_model(const QuantBenchArgs& a, const std::vector<int64_t>& ns, ThreadPool& pool) {
  auto f = GgufFile::open(a.gguf);
  if (!f.ok()) return fail(f.message(), a.json);
  if (a.copy && a.repacked) return fail("--copy and --repacked: pick one", a.json);
  std::vector<WeightView> ws;
  std::vector<std::vector<uint8_t>> packs;  // --repacked: the loader's layouts
  size_t bytes = 0;
  int64_t max_dim = 0;
  const bool tied = (*f)->find_tensor("output.weight") == nullptr;
  for (const GgufTensor& t : (*f)->tensors()) {
    const bool weight = t.ne.size() == 2 && t.name.size() > 7 &&
                        t.name.compare(t.name.size() - 7, 7, ".weight") == 0;
    if (!weight || (t.name == "token_embd.weight" && !tied)) continue;
    auto wv = make_weight_view(t.type, t.data, t.ne[1], t.ne[0]);
    if (!wv.ok()) return fail(wv.message(), a.json);
    if (a.repacked && quant::x16_fits(*wv)) {
      packs.emplace_back(quant::x16_bytes(*wv));
      quant::repack_x16(*wv, 0, quant::x16_group_count(wv->rows), packs.back().data());
      wv->data = packs.back().data();
      wv->layout = quant::x16_layout_of(t.type);
    }
    ws.push_back(*wv);
    bytes += t.nbytes;
    max_dim = std::max({max_dim, t.ne[0], t.ne[1]});
  }
  // --copy: the weights in one anonymous buffer with transparent huge pages (as a loader that
  // keeps "one aligned copy" would hold them) instead of the file mapping's 4 KiB pages.
  void* copy = nullptr;
  if (a.copy) {
    constexpr size_t kHuge = size_t(2) << 20;
    size_t total = 0;
    for (const WeightView& w : ws) total += (w.row_bytes * size_t(w.rows) + 63) / 64 * 64;
    total = (total + kHuge - 1) / kHuge * kHuge;
    copy = std::aligned_alloc(kHuge, total);
    if (copy == nullptr) return fail("--copy: out of memory", a.json);
    madvise(copy, total, MADV_HUGEPAGE);
    auto* dst = static_cast<uint8_t*>(copy);
    for (WeightView& w : ws) {
      const size_t nb = w.row_bytes * size_t(w.rows);
      std::memcpy(dst, w.data, nb);
      w.data = dst;
      dst += (nb + 63) / 64 * 64;
    }
  }
  json rows = json::array();
  for (int64_t n : ns) {
    const auto x = quant_data::random_activations(n * max_dim, 2);
    std::vector<float> y(size_t(n * max_dim));
    double flops = 0.0;
    for (const WeightView& w : ws) flops += 2.0 * double(n) * double(w.rows) * double(w.cols);
    double best = 1e30;
    for (int rep = 0; rep < a.reps + 1; ++rep) {  // the first pass warms up
      const double t0 = clock_ms(a.cpu_time);
      for (const WeightView& w : ws) matmul(w, x.data(), n, nullptr, y.data(), pool);
      if (rep > 0) best = std::min(best, clock_ms(a.cpu_time) - t0);
    }
    rows.push_back({{"n", n},
                    {"ms", best},
                    {"tokens_per_s", double(n) * 1000.0 / best},
                    {"gflops", flops / (best * 1e6)},
                    {"weight_gbs", double(bytes) / (best * 1e6)}});
    if (!a.json)
      std::printf("| %s | %lld | %zu | %.2f | %.1f | %.1f |\n", a.gguf.c_str(), (long long)n,
                  ws.size(), best, double(n) * 1000.0 / best, flops / (best * 1e6));
  }
  std::free(copy);
  if (a.json)
    print_json(json{{"cpu", cpu_features().brand},
                    {"features", cpu_feature_string()},
                    {"isa_level", isa_level_name(isa_level())},
                    {"threads", a.threads},
                    {"gguf", a.gguf},
                    {"weights", a.copy       ? "huge-page copy"
                                : a.repacked ? "repacked"
                                             : "file mapping"},
                    {"weight_bytes", bytes},
                    {"repacked_matrices", packs.size()},
                    {"results", rows}},
               2);
  return 0;
}

Result<std::vector<GgmlType>> parse_types(const std::string& list) {
  std::vector<GgmlType> types;
  for (const std::string& s : split(list, ',')) {
    const auto t = type_by_name(s);
    if (!t) return make_error(ErrorCode::InvalidArgument, "--types: '{}' is not a weight type", s);
    types.push_back(*t);
  }
  return types;
}

Result<std::vector<std::pair<int64_t, int64_t>>> parse_shapes(const std::string& list) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (const std::string& s : split(list, ',')) {
    long long r = 0, c = 0;
    if (std::sscanf(s.c_str(), "%lldx%lld", &r, &c) != 2 || r < 1 || c < 1)
      return make_error(ErrorCode::InvalidArgument, "--shapes: '{}' is not ROWSxCOLS", s);
    shapes.emplace_back(r, c);
  }
  return shapes;
}

Result<std::vector<int64_t>> parse_rows(const std::string& list) {
  std::vector<int64_t> ns;
  for (const std::string& s : split(list, ',')) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (*end != 0 || v < 1)
      return make_error(ErrorCode::InvalidArgument, "--rows: '{}' is not a count", s);
    ns.push_back(v);
  }
  return ns;
}

// The kernel tables to time: every one this CPU supports (--all-paths), or the dispatched ones
// (nullptr).
std::vector<const quant::QuantKernels*> kernel_tables(bool all_paths) {
  std::vector<const quant::QuantKernels*> paths;
  if (!all_paths) return {nullptr};
  int n = 0;
  const quant::QuantKernels* const* all = quant::all_kernels(&n);
  for (int i = 0; i < n; ++i)
    if (quant::cpu_supports(*all[i])) paths.push_back(all[i]);
  return paths;
}

// One weight type and shape on random weights: per activation row count and kernel table, the
// best of --reps after a warm-up; a row each in `rows` (and in the table unless --json).
void time_shape(const QuantBenchArgs& a, GgmlType t, int64_t R, int64_t C,
                const std::vector<int64_t>& ns,
                const std::vector<const quant::QuantKernels*>& paths, ThreadPool& pool,
                json& rows) {
  const auto w = quant_data::random_rows(t, R, C, 1);
  WeightView wv = *make_weight_view(t, w.data(), R, C);
  std::vector<uint8_t> packed;  // --repacked: the layout the model loader gives the type
  if (a.repacked && quant::x16_fits(wv)) {
    packed.resize(quant::x16_bytes(wv));
    quant::repack_x16(wv, 0, quant::x16_group_count(R), packed.data());
    wv.data = packed.data();
    wv.layout = quant::x16_layout_of(t);
  }
  for (int64_t n : ns) {
    const auto x = quant_data::random_activations(n * C, 2);
    std::vector<float> y(size_t(n * R));
    for (const quant::QuantKernels* k : paths) {
      const quant::QuantKernels& dk = k ? *k : quant::decode_kernels(t);
      const quant::QuantKernels& pk = k ? *k : quant::prefill_kernels(t);
      quant::matmul_with(dk, pk, wv, x.data(), n, nullptr, y.data(), pool);  // warm up
      double best = 1e30;
      for (int rep = 0; rep < a.reps; ++rep) {
        const double t0 = clock_ms(a.cpu_time);
        quant::matmul_with(dk, pk, wv, x.data(), n, nullptr, y.data(), pool);
        best = std::min(best, clock_ms(a.cpu_time) - t0);
      }
      const double gflops = 2.0 * double(n) * double(R) * double(C) / (best * 1e6);
      const double gbs = double(w.size()) / (best * 1e6);
      const char* name = n <= kQuantDecodeMaxRows ? dk.name : pk.name;
      rows.push_back({{"type", ggml_type_name(t)},
                      {"rows", R},
                      {"cols", C},
                      {"n", n},
                      {"path", name},
                      {"repacked", wv.layout != WeightLayout::Rows},
                      {"ms", best},
                      {"gflops", gflops},
                      {"weight_gbs", gbs}});
      if (!a.json)
        std::printf("| %s | %lld x %lld | %lld | %s | %.3f | %.1f | %.1f |\n",
                    ggml_type_name(t).c_str(), (long long)R, (long long)C, (long long)n, name, best,
                    gflops, gbs);
    }
  }
}

// The CPU line and the table's head of --gguf's run.
void print_model_head(const QuantBenchArgs& a) {
  std::printf("cpu: %s\nfeatures: %s\nisa level: %s, threads: %d, clock: %s, weights: %s\n\n",
              cpu_features().brand.c_str(), cpu_feature_string().c_str(),
              isa_level_name(isa_level()), a.threads, a.cpu_time ? "thread cpu time" : "wall",
              a.copy       ? "huge-page copy"
              : a.repacked ? "repacked"
                           : "file mapping");
  std::printf("| file | n | matrices | ms per pass | tokens/s (matmul only) | GFLOP/s |\n");
  std::printf("|---|---|---|---|---|---|\n");
}

// The CPU line and the table's head of the shape sweep.
void print_sweep_head(const QuantBenchArgs& a) {
  std::printf("cpu: %s\nfeatures: %s\nisa level: %s, threads: %d, clock: %s\n\n",
              cpu_features().brand.c_str(), cpu_feature_string().c_str(),
              isa_level_name(isa_level()), a.threads, a.cpu_time ? "thread cpu time" : "wall");
  std::printf("| type | shape (rows x cols) | n | path | ms | GFLOP/s | weight GB/s |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
}

int run(const QuantBenchArgs& a) {
  if (a.cpu_time && a.threads != 1) return fail("--cpu-time needs -t 1", a.json);
  auto types = parse_types(a.types);
  if (!types.ok()) return fail(types.message(), a.json);
  auto shapes = parse_shapes(a.shapes);
  if (!shapes.ok()) return fail(shapes.message(), a.json);
  auto ns = parse_rows(a.rows);
  if (!ns.ok()) return fail(ns.message(), a.json);
  if (!a.gguf.empty()) {
    ThreadPool pool(a.threads);
    if (!a.json) print_model_head(a);
    return run_model(a, *ns, pool);
  }
  const std::vector<const quant::QuantKernels*> paths = kernel_tables(a.all_paths);
  ThreadPool pool(a.threads);
  json rows = json::array();
  if (!a.json) print_sweep_head(a);
  for (GgmlType t : *types)
    for (const auto& [R, C] : *shapes)
      if (C % ggml_block_size(t) == 0)  // else llama-quantize falls back to another type
        time_shape(a, t, R, C, *ns, paths, pool, rows);
  if (a.json) {
    json kp = json::object();
    for (GgmlType t : weight_types()) kp[ggml_type_name(t)] = kernel_path(t);
    print_json(json{{"cpu", cpu_features().brand},
                    {"features", cpu_feature_string()},
                    {"isa_level", isa_level_name(isa_level())},
                    {"threads", a.threads},
                    {"kernel_paths", kp},
                    {"results", rows}},
               2);
  }
  return 0;
}

}  // namespace

Runner add_quant_bench(CLI::App& app) {
  auto a = std::make_shared<QuantBenchArgs>();
  app.add_option("--types", a->types, "Weight types, comma separated")->capture_default_str();
  app.add_option("--shapes", a->shapes, "Weight shapes ROWSxCOLS (out x in), comma separated")
      ->capture_default_str();
  app.add_option("-n,--rows", a->rows, "Activation rows per matmul, comma separated")
      ->capture_default_str();
  app.add_option("--reps", a->reps, "Timed repetitions (the best is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--gguf", a->gguf,
                 "Time every matrix product of a forward through this file's weights instead")
      ->check(CLI::ExistingFile);
  app.add_flag("--copy", a->copy,
               "With --gguf: multiply from one huge-page copy of the weights, not the mapping");
  app.add_flag("--cpu-time", a->cpu_time,
               "Time by the thread's CPU time instead of wall time (with -t 1)");
  app.add_flag("--all-paths", a->all_paths,
               "Every kernel path this CPU supports, not only the dispatched ones");
  add_threads_option(app, a->threads);
  app.add_flag("--repacked", a->repacked,
               "Multiply weights repacked in groups of 16 rows, as the model loader lays out "
               "the types that have such a layout (q8_0, q4_0, q5_0, q5_1, iq4_nl, q4_K, q5_K, "
               "q6_K, iq4_xs), instead of the file's rows (with --gguf too)");
  app.add_flag("--json", a->json, "JSON output");
  return [a] { return run(*a); };
}

}  // namespace kamera::cli
