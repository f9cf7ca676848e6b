// Chat templates: turn a conversation into the prompt text a chat model was trained on.
//
// A ChatTemplate runs Jinja source (jinja.h) as Hugging Face transformers' apply_chat_template
// does: the template sees `messages` (a list of dicts with role, content and any extra fields),
// `add_generation_prompt`, `bos_token`, `eos_token`, `tools` (none when absent) and
// `documents` (none), plus caller-supplied variables such as `enable_thinking`.
//
// Sources, as `kamera chat --chat-template NAME|FILE` and the server choose them:
//   - the GGUF's `tokenizer.chat_template` (from_gguf): run as Jinja; if it does not parse with
//     this interpreter, the built-in that llama.cpp's detection picks for that text replaces it;
//   - a built-in by name (named): chatml (Qwen family), llama3, deepseek2, deepseek3, phi3
//     (Phi-3, Phi-4-mini), gemma (Gemma 2 and 3), smollm3 (its /think and /no_think system
//     flags); the server takes phi3 for a phi3 file that carries no template;
//   - a file of Jinja source (from_file), or either through from_arg.
//
// The built-ins render exactly as llama.cpp's fallbacks of the same names (llama-chat.cpp) when
// bos_token is empty; llama3, deepseek2 and deepseek3 put bos_token first, as the models' own
// templates do (pass "" when the tokenizer adds BOS itself). Unlike DeepSeek-V3's own template,
// the deepseek3 built-in keeps a system message in place followed by "\n\n", as llama.cpp does.
// gemma puts bos_token first and renders as llama.cpp's gemma fallback after it; smollm3 has no
// llama.cpp fallback (it detects the template as chatml) and follows the released template
// without its date line.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "jinja/jinja.h"

namespace kamera {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;  // the text
  // More keys for the message dict, in order: tool_calls, reasoning_content, name,
  // tool_call_id, ... A "content" key here replaces `content` (null for an assistant turn that
  // only calls tools, or a list of parts).
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
};

// Messages' contents as strings with their literal spans and pieces (jinja/value.h: a client's
// text and chunk parts): contents[i], where set, is message i's content, in place of its
// `content` and of a "content" key in its fields.
using ContentTexts = std::span<const std::optional<jinja::Text>>;

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json tools;  // a list of tool schemas; null renders as none
  // More template variables (an object), e.g. {"enable_thinking": false}.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  jinja::RenderLimits limits;
  std::time_t now = 0;  // strftime_now's time; 0 is the current time
  // When set, the messages and tools are a client's: each of their strings has the literal bytes
  // this returns (and every key is literal), which render_text reports wherever the template
  // puts them, however it transforms them (jinja/value.h). Null: all of it is trusted.
  jinja::LiteralSpans literal;
};

class ChatTemplate {
 public:
  // Jinja source; `origin` names it in errors ("chat template", a file path).
  static Result<ChatTemplate> from_source(std::string_view source,
                                          std::string origin = "chat template");
  // The GGUF's tokenizer.chat_template: Jinja, else the built-in detected from its text.
  static Result<ChatTemplate> from_gguf(std::string_view source);
  static Result<ChatTemplate> named(std::string_view name);
  static Result<ChatTemplate> from_file(const std::string& path);
  // A built-in's name, else a file path.
  static Result<ChatTemplate> from_arg(std::string_view name_or_path);

  // The built-in llama.cpp's llm_chat_detect_template would pick for this template text, among
  // those kamera has (chatml, llama3, deepseek2, deepseek3, phi3, gemma); nullopt for any other.
  static std::optional<std::string> detect_builtin(std::string_view source);
  static std::vector<std::string> builtin_names();
  // The Jinja source of a built-in (empty for an unknown name).
  static std::string_view builtin_source(std::string_view name);

  Result<std::string> render(std::span<const ChatMessage> messages,
                             const ChatRenderOptions& options) const;
  Result<jinja::Text> render_text(std::span<const ChatMessage> messages,
                                  const ChatRenderOptions& options,
                                  ContentTexts contents = {}) const;
  // The same from an OpenAI-style JSON list of message objects (kept as they are).
  Result<std::string> render_json(const nlohmann::ordered_json& messages,
                                  const ChatRenderOptions& options) const;
  // render_json with the spans of the text that print the literal bytes of the messages and
  // tools (options.literal); the rest is the template's own text. The pieces of `contents` come
  // back as spans of their own.
  Result<jinja::Text> render_json_text(const nlohmann::ordered_json& messages,
                                       const ChatRenderOptions& options,
                                       ContentTexts contents = {}) const;

  // "chatml", ... for a built-in; the origin for other sources.
  const std::string& name() const { return name_; }
  bool is_builtin() const { return builtin_; }
  // The Jinja source it renders (the server detects its tool-call format from it).
  const std::string& source() const { return source_; }

 private:
  std::shared_ptr<const jinja::Template> tmpl_;
  std::string name_;
  std::string source_;
  bool builtin_ = false;
};

}  // namespace kamera
