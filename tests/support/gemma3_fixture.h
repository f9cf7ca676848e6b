// The committed tiny Gemma 3 pair and llama.cpp's view of it (tests/data/gemma3/README.md).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/idefics3_fixture.h"  // read_f32, rel_diff

namespace gemma3_fixture {

inline const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/gemma3/";

using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

// llama.cpp's chunks of the prompt: text runs and the picture's place (-1 stands for it).
inline std::vector<int32_t> llama_cpp_flat_prompt() {
  std::ifstream jf(kDir + "llama_cpp_64.json");
  const auto ref = nlohmann::json::parse(jf);
  std::vector<int32_t> flat;
  for (const auto& c : ref["chunks"])
    if (c.contains("image"))
      flat.push_back(-1);
    else
      for (int32_t t : c["text"]) flat.push_back(t);
  return flat;
}

}  // namespace gemma3_fixture
