// libFuzzer target: the Jinja chat-template interpreter. The input is template text: it is
// lexed and parsed, and what parses is rendered over a small conversation with tools under
// tight limits; llama.cpp-style detection runs on the same text. Rendered again with the
// messages and tools as literal values, the text is the same and its literal spans are sorted,
// disjoint, non-empty and inside it (else the target traps).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "jinja/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view src(reinterpret_cast<const char*>(data), size);
  (void)kamera::ChatTemplate::detect_builtin(src);
  auto t = kamera::ChatTemplate::from_source(src, "fuzz");
  if (!t.ok()) return 0;
  static const std::vector<kamera::ChatMessage> messages = {
      {"system", "You are terse."}, {"user", "Hi \xF0\x9F\x91\x8B"}, {"assistant", " ok "}};
  kamera::ChatRenderOptions o;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"x": [1, 2.5, null]}}}])");
  o.extra["enable_thinking"] = false;
  o.now = 1;
  o.limits.max_steps = 50'000;
  o.limits.max_output_bytes = 1 << 20;
  o.limits.max_call_depth = 32;
  const auto plain = t->render(messages, o);
  o.literal = [](std::string_view s) { return kamera::jinja::all_or_none(s.size(), true); };
  const auto marked = t->render_text(messages, o);
  if (plain.ok() != marked.ok()) __builtin_trap();
  if (!marked.ok()) return 0;
  if (marked->str != *plain) __builtin_trap();
  size_t end = 0;
  for (const kamera::jinja::Span& sp : marked->literal) {
    if (sp.begin >= sp.end || sp.end > marked->str.size() || (end > 0 && sp.begin <= end))
      __builtin_trap();
    end = sp.end;
  }
  return 0;
}
