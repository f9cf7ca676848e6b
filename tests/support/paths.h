// Locations of the real models (../shared/models, never committed) and a skip helper.
#pragma once

#include <sys/stat.h>

#include <string>

namespace test_paths {

inline std::string shared_models() {
  return std::string(KAMERA_SHARED_DIR) + "/models";
}
inline bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}
inline std::string stories_dir() {
  return shared_models() + "/stories260K";
}
inline std::string aidreams_dir() {
  return shared_models() + "/aidreams260K";
}

}  // namespace test_paths

// Skips the current test with a clear message when a real model file is absent.
#define REQUIRE_MODEL_FILE(path)                                                          \
  do {                                                                                    \
    if (!test_paths::exists(path))                                                        \
      GTEST_SKIP() << "real model file " << (path)                                        \
                   << " is absent (../shared/models is provided in CI, not in the repo)"; \
  } while (0)
