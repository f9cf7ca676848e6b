// kamera info: what this CPU offers and the kernel paths kamera takes on it. The CPU features
// found (cpuid), the ISA level in use (capped by KAMERA_ISA), the f32 BLAS path, and the matmul
// path for every weight type; with -m, the model's architecture and features (model/config.h), the
// weight types of its tensors and their paths.
// Every `bench --json` carries the same block (system_info) so numbers name the path they ran.
#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/cpu_features.h"
#include "ops/gemm.h"
#include "ops/ggml_q8_0.h"
#include "ops/quant.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

// The path a product with a weight of type t takes in the forward (model/weight.h's linear).
std::string weight_path(GgmlType t) {
  if (t == GgmlType::F32) return "openblas sgemm (exact f32)";
  return kernel_path(t);
}

// {type name: {"tensors", "bytes", "path"}} over the model's weight matrices.
json model_weight_types(const Model& m) {
  struct Count {
    int64_t tensors = 0;
    size_t bytes = 0;
  };
  std::map<std::string, Count> by_type;
  std::map<std::string, GgmlType> type_of;
  m.for_each_weight([&](const std::string&, const Weight& w) {
    const std::string name = ggml_type_name(w.type());
    by_type[name].tensors += 1;
    by_type[name].bytes += w.bytes();
    type_of[name] = w.type();
  });
  json out = json::object();
  for (const auto& [name, c] : by_type) {
    const GgmlType t = type_of[name];
    const bool ggml = m.numerics == Numerics::Ggml && t == GgmlType::Q8_0;  // ops/ggml_q8_0.h
    out[name] = json{{"tensors", c.tensors},
                     {"bytes", c.bytes},
                     {"path", ggml ? ggml_q8_0::path_name() : weight_path(t)}};
  }
  return out;
}

}  // namespace

json system_info(const Model* m) {
  const char* cap = std::getenv("KAMERA_ISA");
  json paths = json::object();
  for (GgmlType t : weight_types()) paths[ggml_type_name(t)] = weight_path(t);
  json j{{"cpu", cpu_features().brand},
         {"cpu_features", cpu_feature_string()},
         {"cpu_isa_level", isa_level_name(cpu_isa_level())},
         {"isa_level", isa_level_name(isa_level())},
         {"isa_cap", cap ? json(cap) : json(nullptr)},
         {"blas_path", blas_path()},
         {"weight_paths", paths}};
  if (m != nullptr) {
    j["model"] = json{{"path", m->source},
                      {"arch", arch_name(m->cfg.arch)},
                      {"features", model_features(m->cfg)},
                      {"numerics", numerics_name(m->numerics)},
                      {"fingerprint", model_summary(*m)["fingerprint"]},
                      {"weight_bytes", m->weight_bytes()},
                      {"weight_types", model_weight_types(*m)}};
  }
  return j;
}

namespace {

struct InfoArgs {
  std::string model;
  bool json = false;
};

void print_text(const json& j) {
  std::printf("cpu: %s\nfeatures: %s\n", j["cpu"].get<std::string>().c_str(),
              j["cpu_features"].get<std::string>().c_str());
  std::printf("isa level: %s (cpu: %s)\nblas: %s\nweight paths:\n",
              j["isa_level"].get<std::string>().c_str(),
              j["cpu_isa_level"].get<std::string>().c_str(),
              j["blas_path"].get<std::string>().c_str());
  for (const auto& [type, path] : j["weight_paths"].items())
    std::printf("  %-7s %s\n", type.c_str(), path.get<std::string>().c_str());
  if (!j.contains("model")) return;
  const json& mj = j["model"];
  std::printf("model: %s (%zu weight bytes)\narch: %s\nfeatures:\n",
              mj["path"].get<std::string>().c_str(), mj["weight_bytes"].get<size_t>(),
              mj["arch"].get<std::string>().c_str());
  for (const auto& f : mj["features"]) std::printf("  %s\n", f.get<std::string>().c_str());
  std::printf("weight types:\n");
  for (const auto& [type, t] : mj["weight_types"].items())
    std::printf("  %-7s %3lld tensors %12zu bytes  %s\n", type.c_str(),
                (long long)t["tensors"].get<int64_t>(), t["bytes"].get<size_t>(),
                t["path"].get<std::string>().c_str());
}

int run_info(const InfoArgs& a) {
  std::shared_ptr<const Model> m;
  if (!a.model.empty()) {
    auto loaded = load_for_cli(a.model, "");
    if (!loaded.ok()) return fail(loaded.error(), a.json);
    m = *loaded;
  }
  const json j = system_info(m.get());
  if (a.json) {
    print_json(j, 2);
  } else {
    print_text(j);
  }
  return 0;
}

}  // namespace

Runner add_info(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  app.add_option("-m,--model", a->model, "Also list this model's weight types and their paths")
      ->check(CLI::ExistingFile);
  app.add_flag("--json", a->json, "JSON output");
  return [a] { return run_info(*a); };
}

}  // namespace kamera::cli
