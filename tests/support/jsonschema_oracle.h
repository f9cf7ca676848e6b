// An independent JSON Schema validator for the grammar tests: Python's jsonschema (Debian's
// python3-jsonschema, installed by scripts/install-deps.sh), run once over a batch of documents
// by scripts/jsonschema_check.py.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/temp_path.h"

namespace oracle {

struct SchemaDocs {
  nlohmann::ordered_json schema;
  std::vector<std::string> docs;
};

inline std::string python() {
  std::ifstream f("/usr/bin/python3");
  return f.good() ? "/usr/bin/python3" : "python3";
}

// One verdict per document of each case; nullopt when the validator is not installed.
inline std::optional<std::vector<std::vector<bool>>> validate(
    const std::vector<SchemaDocs>& cases) {
  nlohmann::ordered_json in = nlohmann::ordered_json::array();
  for (const SchemaDocs& c : cases) in.push_back({{"schema", c.schema}, {"docs", c.docs}});
  const std::string in_path = unique_temp("jsonschema-in.json");
  const std::string out_path = unique_temp("jsonschema-out.json");
  std::ofstream(in_path) << in.dump();
  const std::string cmd = python() + " " + std::string(KAMERA_SOURCE_DIR) +
                          "/scripts/jsonschema_check.py " + in_path + " " + out_path;
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 3) << cmd << " failed: " << rc;
    return std::nullopt;
  }
  std::ifstream f(out_path);
  const auto out = nlohmann::json::parse(f);
  std::vector<std::vector<bool>> verdicts;
  for (const auto& row : out) verdicts.push_back(row.get<std::vector<bool>>());
  return verdicts;
}

}  // namespace oracle

// Skips the test when Python's jsonschema is absent (CI installs it: scripts/install-deps.sh).
#define REQUIRE_ORACLE(v)                                                                      \
  do {                                                                                         \
    if (!(v)) GTEST_SKIP() << "python3-jsonschema is not installed (scripts/install-deps.sh)"; \
  } while (0)
