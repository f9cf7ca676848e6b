#include "toolcall/format.h"

namespace kamera::toolcall {

const char* format_name(Format f) {
  switch (f) {
    case Format::Hermes:
      return "hermes";
    case Format::Llama3:
      return "llama3";
    case Format::DeepSeek3:
      return "deepseek3";
    case Format::Harmony:
      return "harmony";
  }
  return "?";
}

std::optional<Format> detect_format(std::string_view src) {
  // gpt-oss's template writes every message's channel (as llama.cpp tells it by <|channel|>).
  if (src.find(kHarmonyChannel) != std::string_view::npos &&
      src.find(kHarmonyMessage) != std::string_view::npos)
    return Format::Harmony;
  if (src.find(kDsCallBegin) != std::string_view::npos) return Format::DeepSeek3;
  if (src.find(kHermesOpen) != std::string_view::npos) return Format::Hermes;
  // Llama-3.1's templates write {"name": ..., "parameters": ...} between header ids.
  if (src.find("<|start_header_id|>") != std::string_view::npos &&
      src.find("\"parameters\": ") != std::string_view::npos)
    return Format::Llama3;
  return std::nullopt;
}

}  // namespace kamera::toolcall
