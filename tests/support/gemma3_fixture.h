// The committed tiny Gemma 3 pair and llama.cpp's view of it (tests/data/gemma3/README.md).
#pragma once

#include <string>
#include <vector>

#include "support/idefics3_fixture.h"  // read_f32, rel_diff
#include "support/mtmd_reference.h"

namespace gemma3_fixture {

inline const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/gemma3/";

using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

// llama.cpp's chunks of the prompt: text runs and the picture's place (-1 stands for it).
inline std::vector<int32_t> llama_cpp_flat_prompt() {
  return mtmd_reference::read_flat_prompt(kDir + "llama_cpp_64.json");
}

}  // namespace gemma3_fixture
