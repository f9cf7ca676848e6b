// `kamera info --json` is how the dispatch is observed from outside: the features found, the
// ISA level in use under a KAMERA_ISA cap, and the kernel path of every weight type. Runs the
// built binary in a fresh process, as a user would.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/ggml_type.h"
#include "support/temp_path.h"

namespace {

nlohmann::json info_json(const std::string& env, const std::string& args = "") {
  const std::string cmd =
      env + " " + std::string(KAMERA_BINARY_DIR) + "/bin/kamera info --json " + args;
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; f && (n = fread(buf.data(), 1, buf.size(), f)) > 0;) out.append(buf.data(), n);
  const int rc = f ? pclose(f) : -1;
  EXPECT_EQ(rc, 0) << cmd;
  EXPECT_TRUE(nlohmann::json::accept(out)) << out;
  return nlohmann::json::parse(out, nullptr, false);
}

bool contains(const nlohmann::json& j, const char* s) {
  return j.get<std::string>().find(s) != std::string::npos;
}

}  // namespace

TEST(Info, ReportsTheUncappedLevelAndEveryWeightType) {
  const auto j = info_json("env -u KAMERA_ISA");
  EXPECT_EQ(j["cpu_features"], kamera::cpu_feature_string());
  EXPECT_EQ(j["isa_level"], kamera::isa_level_name(kamera::cpu_isa_level()));
  EXPECT_TRUE(j["isa_cap"].is_null());
  for (kamera::GgmlType t : kamera::weight_types())
    EXPECT_TRUE(j["weight_paths"].contains(kamera::ggml_type_name(t))) << kamera::ggml_type_name(t);
  EXPECT_TRUE(contains(j["weight_paths"]["f32"], "openblas"));
}

TEST(Info, KameraIsaCapIsVisibleInEveryPath) {
  if (kamera::cpu_isa_level() < kamera::IsaLevel::Avx2) GTEST_SKIP() << "CPU without AVX2";
  const auto j = info_json("KAMERA_ISA=avx2");
  EXPECT_EQ(j["isa_level"], "avx2");
  EXPECT_EQ(j["isa_cap"], "avx2");
  for (const auto& [type, path] : j["weight_paths"].items()) {
    if (type == "f32") continue;
    EXPECT_TRUE(contains(path, "decode avx2")) << type << ": " << path;
    EXPECT_TRUE(contains(path, "prefill avx2")) << type << ": " << path;
    EXPECT_FALSE(contains(path, "avx512")) << type << ": " << path;
    EXPECT_FALSE(contains(path, "amx")) << type << ": " << path;
    EXPECT_FALSE(contains(path, "vnni")) << type << ": " << path;  // plain AVX2
  }
  // The avx2 path repacks the nine x16 types (issue 51); scalar repacks nothing.
  for (const char* t : {"q8_0", "q4_0", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"})
    EXPECT_TRUE(contains(j["weight_paths"][t], "repacked x16")) << t;
  EXPECT_FALSE(contains(j["weight_paths"]["q4_1"], "repacked")) << j["weight_paths"]["q4_1"];
  const auto s = info_json("KAMERA_ISA=scalar");
  EXPECT_EQ(s["isa_level"], "scalar");
  EXPECT_TRUE(contains(s["weight_paths"]["q4_K"], "decode scalar")) << s["weight_paths"]["q4_K"];
  EXPECT_FALSE(contains(s["weight_paths"]["q8_0"], "repacked")) << s["weight_paths"]["q8_0"];
}

// KAMERA_ISA=avx2_vnni: the avx2 level with AVX-VNNI's kernels, named in every path.
TEST(Info, AvxVnniCapNamesItsPath) {
  if (kamera::cpu_isa_level() < kamera::IsaLevel::Avx2 || !kamera::cpu_features().avx_vnni)
    GTEST_SKIP() << "CPU without AVX-VNNI (" << kamera::cpu_feature_string() << ")";
  const auto j = info_json("KAMERA_ISA=avx2_vnni");
  EXPECT_EQ(j["isa_level"], "avx2");
  EXPECT_EQ(j["isa_cap"], "avx2_vnni");
  EXPECT_TRUE(contains(j["cpu_features"], "avx_vnni")) << j["cpu_features"];
  for (const auto& [type, path] : j["weight_paths"].items()) {
    if (type == "f32") continue;
    EXPECT_TRUE(contains(path, "decode avx2_vnni")) << type << ": " << path;
    EXPECT_FALSE(contains(path, "avx512")) << type << ": " << path;
  }
  for (const char* t : {"q8_0", "q4_0", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"})
    EXPECT_TRUE(contains(j["weight_paths"][t], "repacked x16 avx-vnni")) << t;
}

TEST(Info, ModelWeightTypesAndBytes) {
  const std::string model = unique_temp("kamera-info-q8.gguf");
  const std::string mk = std::string(KAMERA_BINARY_DIR) +
                         "/bin/kamera make-model --arch llama --preset tiny --type q8_0 -o " +
                         model + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(mk.c_str()), 0);
  const auto j = info_json("", "-m " + model);
  ASSERT_TRUE(j.contains("model"));
  const auto& types = j["model"]["weight_types"];
  ASSERT_TRUE(types.contains("q8_0")) << types;
  EXPECT_GT(types["q8_0"]["tensors"].get<int>(), 0);
  size_t total = 0;
  for (const auto& [type, t] : types.items()) total += t["bytes"].get<size_t>();
  EXPECT_EQ(total, j["model"]["weight_bytes"].get<size_t>());
  std::remove(model.c_str());
}

// `kamera info -m` names the family and its features (model/config.h, model_features): the q/k
// head norms of qwen3, its experts for qwen3moe, qwen3vl's interleaved M-RoPE and deepstack, MLA
// for deepseek2 and the layout its file holds it in (make-model --mla-layout), smollm3's layers
// without rope, gemma3's sliding-window layers.
TEST(Info, ModelFamilyAndFeatures) {
  const struct {
    const char* arch;
    std::vector<std::string> want;
    const char* preset = "tiny";
    const char* args = "";
  } cases[] = {
      {"qwen3", {"gqa (4 heads, 2 kv heads, head 32)", "qk_norm"}},
      {"qwen3moe", {"qk_norm", "moe (8 experts, 2 used, 0 shared", "top-k normalized"}},
      {"qwen3vl", {"qk_norm", "mrope (interleaved)", "deepstack (2 layers"}},
      {"qwen3vlmoe", {"moe (8 experts", "mrope (interleaved)", "deepstack (2 layers"}},
      {"qwen2", {"gqa", "qkv_bias"}},
      {"deepseek2", {"mla (kv_lora 32, rope 8)", "mla_layout split"}},
      {"deepseek2", {"mla_layout kv_b"}, "tiny", " --mla-layout kv_b"},
      {"smollm3", {"nope (no rope on layers 3:"}},
      {"gemma3",
       {"qk_norm", "sliding_window (8 positions on layers 0, 1, 2, 3, 4, local rope base",
        "gemma3 (embedding x sqrt(dim)"}},
      {"deepseek2",
       {"mla (kv_lora 32, rope 8)", "moe (8 experts, 2 used, 2 shared",
        "v3_routing (sigmoid scores, selection bias exp_probs_b, 1 of 1 groups, "
        "weights x 2.446)"},
       "kimi-vl-tiny"},
      {"phi3",
       {"gqa (4 heads, 2 kv heads, head 16)", "partial_rotary (12 of 16 head dims rotated)",
        "longrope (long factors in use; long above the original context 4096; "
        "attn_factor 1.0408)"}}};

  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.arch) + " " + c.preset);
    const std::string model =
        unique_temp(std::string("kamera-info-") + c.arch + "-" + c.preset + ".gguf");
    const std::string mk = std::string(KAMERA_BINARY_DIR) + "/bin/kamera make-model --arch " +
                           c.arch + " --preset " + c.preset + c.args + " -o " + model +
                           " >/dev/null 2>&1";
    ASSERT_EQ(std::system(mk.c_str()), 0);
    const auto j = info_json("", "-m " + model);
    ASSERT_TRUE(j.contains("model"));
    EXPECT_EQ(j["model"]["arch"], c.arch);
    std::string all;
    for (const auto& f : j["model"]["features"]) all += f.get<std::string>() + "; ";
    for (const std::string& w : c.want) EXPECT_NE(all.find(w), std::string::npos) << all;
    if (!std::string(c.arch).ends_with("moe") && std::string(c.preset) == "tiny") {
      EXPECT_EQ(all.find("moe"), std::string::npos) << all;
    }
    std::remove(model.c_str());
  }
}

// --rope-context picks phi3's LongRoPE set as llama.cpp's n_ctx does: the long factors above the
// original context (4096 for make-model's phi3 tiny, trained to 8192; the default is the trained
// context), the short ones at or below it.
TEST(Info, RopeContextChoosesTheLongRopeSet) {
  const std::string model = unique_temp("kamera-info-phi3-ctx.gguf");
  const std::string mk = std::string(KAMERA_BINARY_DIR) + "/bin/kamera make-model --arch phi3 -o " +
                         model + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(mk.c_str()), 0);
  for (const auto& [ctx, set] : {std::pair{"", "long"},
                                 {" --rope-context 4096", "short"},
                                 {" --rope-context 4097", "long"}}) {
    const auto j = info_json("", "-m " + model + ctx);
    ASSERT_TRUE(j.contains("model")) << ctx;
    std::string all;
    for (const auto& f : j["model"]["features"]) all += f.get<std::string>() + "; ";
    EXPECT_NE(all.find(std::string("longrope (") + set + " factors in use"), std::string::npos)
        << ctx << ": " << all;
  }
  std::remove(model.c_str());
}
