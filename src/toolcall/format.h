// How a chat model writes a tool call, as its own chat template renders one (the model was
// trained on that text), and what kamera does with each way:
//
//   hermes     Qwen2.5, Qwen3 (and Hermes-style templates): the message's text, then one block
//              per call: <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
//   llama3     Llama-3.1 / 3.2 / 3.3: the whole message is one JSON object
//              {"name": "NAME", "parameters": {...}} (the templates take one call per message)
//   deepseek3  DeepSeek-V3: <｜tool▁calls▁begin｜> then per call
//              <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
//              then <｜tool▁calls▁end｜>
//   harmony    gpt-oss: the output is a sequence of messages, each a header then
//              <|message|>BODY and an end marker (toolcall/harmony.h); a call is the message
//              <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
//
// The format is read off the template's source, by the markers it writes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kamera::toolcall {

enum class Format { Hermes, Llama3, DeepSeek3, Harmony };

const char* format_name(Format f);
// The format a chat template renders tool calls in; nullopt when it renders none.
std::optional<Format> detect_format(std::string_view template_source);

// The markers of each format.
inline constexpr std::string_view kHermesOpen = "<tool_call>";
inline constexpr std::string_view kHermesClose = "</tool_call>";
inline constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kDsSep = "<｜tool▁sep｜>";
inline constexpr std::string_view kDsArgsOpen = "\n```json\n";
inline constexpr std::string_view kDsArgsClose = "\n```";
inline constexpr std::string_view kHarmonyStart = "<|start|>";
inline constexpr std::string_view kHarmonyChannel = "<|channel|>";
inline constexpr std::string_view kHarmonyMessage = "<|message|>";
inline constexpr std::string_view kHarmonyConstrain = "<|constrain|>";
inline constexpr std::string_view kHarmonyEnd = "<|end|>";
inline constexpr std::string_view kHarmonyCall = "<|call|>";
inline constexpr std::string_view kHarmonyReturn = "<|return|>";

}  // namespace kamera::toolcall
