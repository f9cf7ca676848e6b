// The chat templates of tests/fixtures/chat_templates for the server tests, and a thinking
// variant of Qwen3's that opens <think> in the generation prompt (as Qwen3-Thinking's and
// DeepSeek-R1's templates do), written once into the gtest temp dir.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tiny {

inline std::string template_fixture(const std::string& name) {
  return std::string(KAMERA_SOURCE_DIR) + "/tests/fixtures/chat_templates/templates/" + name +
         ".jinja";
}

inline std::string thinking_template() {
  std::ifstream f(template_fixture("qwen3"));
  std::stringstream s;
  s << f.rdbuf();
  std::string t = s.str();
  const std::string open = "{{- '<|im_start|>assistant\\n' }}";
  const size_t at = t.rfind(open);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos)
    t.replace(at, open.size(), "{{- '<|im_start|>assistant\\n<think>\\n' }}");
  const std::string path = testing::TempDir() + "kamera-qwen3-thinking.jinja";
  std::ofstream(path) << t;
  return path;
}

}  // namespace tiny
