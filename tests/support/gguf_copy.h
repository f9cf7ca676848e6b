// Test helpers over GGUF files and the engine: a copy of a file with keys changed, every
// position's logits of a prefill, and the check of one case of a llama.cpp logits fixture.
#pragma once

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

namespace tiny {

using namespace kamera;

inline std::vector<float> prefill_all(const Model& m, const std::vector<int32_t>& ids,
                                      int max_batch) {
  auto pool = tiny::pool_for(m, int(ids.size()) + 16);
  Engine e(m, 2);
  const SeqId s = pool->create_sequence();
  ForwardOptions o;
  o.logits = LogitsMode::All;
  o.max_batch = max_batch;
  auto pos = tiny::linear_positions(int(ids.size()));
  auto r = e.forward(*pool, s, ForwardInput::from_tokens(ids, pos), o);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : std::vector<float>{};
}

// A copy of a GGUF with keys replaced or added (`set`) and extra f32 tensors, every tensor as f32
// (the 2-D ones as `matrix_type`).
inline void copy_gguf(const std::string& from, const std::string& to,
                      const std::function<void(GgufWriter&)>& set,
                      const std::vector<std::pair<std::string, std::vector<int64_t>>>& extra = {},
                      DType matrix_type = DType::F32) {
  auto f = GgufFile::open(from);
  ASSERT_TRUE(f.ok()) << f.message();
  GgufWriter w;
  for (const auto& [key, v] : (*f)->metadata()) {
    if (v.type == GgufType::U32)
      w.set_u32(key, uint32_t(std::get<int64_t>(v.data)));
    else if (v.type == GgufType::I32)
      w.set_i32(key, int32_t(std::get<int64_t>(v.data)));
    else if (v.type == GgufType::F32)
      w.set_f32(key, float(std::get<double>(v.data)));
    else if (v.type == GgufType::BOOL)
      w.set_bool(key, std::get<bool>(v.data));
    else if (v.type == GgufType::STRING)
      w.set_string(key, std::get<std::string>(v.data));
    else if (v.type == GgufType::ARRAY && v.array_type == GgufType::STRING)
      w.set_string_array(key, std::get<std::vector<std::string>>(v.data));
    else if (v.type == GgufType::ARRAY && v.array_type == GgufType::F32) {
      const auto& d = std::get<std::vector<double>>(v.data);
      w.set_f32_array(key, std::vector<float>(d.begin(), d.end()));
    } else if (v.type == GgufType::ARRAY && v.array_type == GgufType::I32) {
      const auto& d = std::get<std::vector<int64_t>>(v.data);
      w.set_i32_array(key, std::vector<int32_t>(d.begin(), d.end()));
    } else {
      FAIL() << "copy_gguf: key " << key << " has a type this helper does not copy";
    }
  }
  set(w);
  for (const GgufTensor& t : (*f)->tensors()) {
    auto data = (*f)->read_f32(t);
    ASSERT_TRUE(data.ok());
    w.add_tensor(t.name, t.ne, t.ne.size() == 2 ? matrix_type : DType::F32,
                 [d = *data](float* dst) { std::copy(d.begin(), d.end(), dst); });
  }
  for (const auto& [name, ne] : extra)
    w.add_tensor(name, ne, DType::F32, [](float* dst) { dst[0] = 0.0f; });
  ASSERT_TRUE(w.write(to).ok());
}

// xxh3_64 of a file's bytes, as the fixtures' manifests write it (16 hex digits).
inline std::string file_xxh3(const std::string& path) {
  std::ifstream gf(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(gf)), {});
  return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()));
}

// Requires the model's logits at every position of `ids` (one prefill) within 1e-4 of the largest
// |logit| of llama.cpp's (the f32 file `logits_path`, n_tokens x n_vocab); returns that relative
// difference.
inline double check_llama_cpp_logits(const Model& m, const std::vector<int32_t>& ids,
                                     const std::string& logits_path) {
  std::ifstream lf(logits_path, std::ios::binary);
  std::vector<float> want(ids.size() * size_t(m.cfg.n_vocab));
  lf.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
  EXPECT_TRUE(lf) << "short logits file";
  const auto got = prefill_all(m, ids, 512);
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  const double rel = tiny::max_abs_diff(got, want) / scale;
  EXPECT_LT(rel, 1e-4);
  return rel;
}

// One case of a llama.cpp logits fixture (tests/data/*/llama_cpp_logits.json): writes the
// make-model file of `spec` (name, seed and dims as make-model sets them), checks its bytes hash
// to the case's xxh3_64, and requires every position's logits within 1e-4 of the largest |logit|
// of llama.cpp's (file `dir` + case["logits"]); returns that relative difference.
inline double check_llama_cpp_case(const SyntheticSpec& spec, const nlohmann::json& c,
                                   const std::string& dir) {
  const std::string path = unique_temp("kamera-llama-cpp-case.gguf");
  EXPECT_TRUE(write_synthetic_gguf(spec, path).ok());
  auto m = tiny::load(path);
  if (!m) return INFINITY;
  EXPECT_EQ(file_xxh3(m->source), c["xxh3_64"].get<std::string>())
      << "make-model writes other bytes than the fixture was made from";
  return check_llama_cpp_logits(*m, c["tokens"].get<std::vector<int32_t>>(),
                                dir + c["logits"].get<std::string>());
}

// The manifest `dir` + llama_cpp_logits.json ({"cases": [...]}).
inline nlohmann::json llama_cpp_manifest(const std::string& dir) {
  std::ifstream mf(dir + "llama_cpp_logits.json");
  EXPECT_TRUE(mf) << "missing " << dir << "llama_cpp_logits.json";
  return mf ? nlohmann::json::parse(mf) : nlohmann::json{{"cases", nlohmann::json::array()}};
}

}  // namespace tiny
