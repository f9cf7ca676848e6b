#include "jinja/chat_template.h"
#include "core/log.h"

#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

namespace kamera {
namespace {

// The built-ins, written as Jinja so they run through the same interpreter. A content that is
// not a string (none for a tool-call turn) renders as "".
constexpr std::string_view kContent =
    "{%- set content = message.content if message.content is string else '' -%}";

struct Builtin {
  std::string_view name;
  std::string body;  // per message, after kContent
  std::string_view head;
  std::string_view generation;
  std::string_view full = {};  // a whole template (body, head and generation unused)
};

// Gemma (2, 3): turns <start_of_turn>user|model ... <end_of_turn>, contents trimmed; Gemma has no
// system role, so system messages (trimmed, joined) open the next user turn, as llama.cpp's gemma
// fallback does.
constexpr std::string_view kGemma =
    "{{- bos_token -}}"
    "{%- set ns = namespace(sys='') -%}"
    "{%- for message in messages -%}"
    "{%- set content = message.content if message.content is string else '' -%}"
    "{%- if message.role == 'system' -%}{%- set ns.sys = ns.sys + (content | trim) -%}"
    "{%- else -%}"
    "{%- set role = 'model' if message.role == 'assistant' else message.role -%}"
    "{{- '<start_of_turn>' + role + '\\n' -}}"
    "{%- if ns.sys and role != 'model' -%}{{- ns.sys + '\\n\\n' -}}{%- set ns.sys = '' -%}"
    "{%- endif -%}"
    "{{- (content | trim) + '<end_of_turn>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}";

// SmolLM3: ChatML with a system header whose "Reasoning Mode" is /think or /no_think, from
// enable_thinking (default true) or a /think or /no_think flag in the system message (the flag
// wins and is removed from the text). Without thinking, assistant turns and the generation
// prompt carry an empty <think></think> block. (The released template also prints today's date,
// which would change the prompt's prefix every day; this one does not.)
constexpr std::string_view kSmollm3 =
    "{%- set think = enable_thinking if enable_thinking is defined else true -%}"
    "{%- set sys = '' -%}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set sys = messages[0].content -%}"
    "{%- if '/no_think' in sys -%}{%- set think = false -%}"
    "{%- elif '/think' in sys -%}{%- set think = true -%}{%- endif -%}"
    "{%- set sys = sys.replace('/no_think', '').replace('/think', '').rstrip() -%}"
    "{%- endif -%}"
    "{%- set empty_think = '' if think else '<think>\n\n</think>\n' -%}"
    "{{- '<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: '"
    " + ('/think' if think else '/no_think') + '\n\n## Custom Instructions\n\n' -}}"
    "{%- if sys -%}{{- sys + '\n\n' -}}"
    "{%- else -%}{{- 'You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n' "
    "-}}{%- endif -%}"
    "{{- '<|im_end|>\n' -}}"
    "{%- for message in messages -%}"
    "{%- set content = message.content if message.content is string else '' -%}"
    "{%- if message.role == 'user' or message.role == 'tool' -%}"
    "{{- '<|im_start|>user\n' + content + '<|im_end|>\n' -}}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\n' + empty_think + content.lstrip('\n') + '<|im_end|>\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' + empty_think -}}{%- endif -%}";

const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> table = {
      {"chatml", "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' -}}", "",
       "<|im_start|>assistant\\n"},
      {"llama3",
       "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + content | trim"
       " + '<|eot_id|>' -}}",
       "{{- bos_token -}}", "<|start_header_id|>assistant<|end_header_id|>\\n\\n"},
      {"deepseek2",
       "{%- if message.role == 'system' -%}{{- content + '\\n\\n' -}}"
       "{%- elif message.role == 'user' -%}{{- 'User: ' + content + '\\n\\n' -}}"
       "{%- elif message.role == 'assistant' -%}"
       "{{- 'Assistant: ' + content + '<｜end▁of▁sentence｜>' -}}{%- endif -%}",
       "{{- bos_token -}}", "Assistant:"},
      {"deepseek3",
       "{%- if message.role == 'system' -%}{{- content + '\\n\\n' -}}"
       "{%- elif message.role == 'user' -%}{{- '<｜User｜>' + content -}}"
       "{%- elif message.role == 'assistant' -%}"
       "{{- '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' -}}{%- endif -%}",
       "{{- bos_token -}}", "<｜Assistant｜>"},
      // Phi-3 / Phi-4-mini (microsoft-Phi-3.5-mini-instruct.jinja's turns; as llama.cpp's phi3,
      // every message is rendered, an empty system one included). The three roles' markers are
      // written whole by the template (a role is the client's text: spliced into a marker it
      // would not be read as the control token)
      {"phi3",
       "{%- if message.role == 'system' -%}{{- '<|system|>' -}}"
       "{%- elif message.role == 'user' -%}{{- '<|user|>' -}}"
       "{%- elif message.role == 'assistant' -%}{{- '<|assistant|>' -}}"
       "{%- else -%}{{- '<|' + message.role + '|>' -}}{%- endif -%}"
       "{{- '\\n' + content + '<|end|>\\n' -}}",
       "", "<|assistant|>\\n"},
      {"gemma", "", "", "", kGemma},
      {"smollm3", "", "", "", kSmollm3},
  };
  return table;
}

std::string assemble(const Builtin& b) {
  if (!b.full.empty()) return std::string(b.full);
  return std::string(b.head) + "{%- for message in messages -%}" + std::string(kContent) + b.body +
         "{%- endfor -%}{%- if add_generation_prompt -%}{{- '" + std::string(b.generation) +
         "' -}}{%- endif -%}";
}

bool has(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

jinja::Value message_value(const ChatMessage& m, const jinja::LiteralSpans* literal,
                           const std::optional<jinja::Text>* content) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["role"] = m.role;
  j["content"] = m.content;
  if (m.fields.is_object()) {
    for (const auto& [k, v] : m.fields.items()) j[k] = v;
  }
  jinja::Value out = jinja::from_json(j, literal);
  if (content && *content) out.object_ref().set("content", jinja::Value::text(**content));
  return out;
}

}  // namespace

std::vector<std::string> ChatTemplate::builtin_names() {
  std::vector<std::string> names;
  for (const Builtin& b : builtins()) names.emplace_back(b.name);
  return names;
}

std::string_view ChatTemplate::builtin_source(std::string_view name) {
  static const std::vector<std::string> sources = [] {
    std::vector<std::string> s;
    for (const Builtin& b : builtins()) s.push_back(assemble(b));
    return s;
  }();
  for (size_t i = 0; i < builtins().size(); ++i) {
    if (builtins()[i].name == name) return sources[i];
  }
  return {};
}

// llama.cpp's detection order (llm_chat_detect_template), so that a template it files under
// another family (phi4, mistral, gemma, ...) is not taken for one of ours.
std::optional<std::string> ChatTemplate::detect_builtin(std::string_view t) {
  if (!builtin_source(t).empty()) return std::string(t);
  const char* family = nullptr;
  if (has(t, "<|im_start|>")) {
    family = has(t, "<|im_sep|>") ? "phi4" : "chatml";
  } else if (t.rfind("mistral", 0) == 0 || has(t, "[INST]")) {
    family = "mistral/llama2";
  } else if (has(t, "<|assistant|>") && has(t, "<|end|>")) {
    family = "phi3";
  } else if (has(t, "<|assistant|>") && has(t, "<|user|>")) {
    family = "falcon3/glmedge";
  } else if ((has(t, "<|user|>") && has(t, "<|endoftext|>")) ||
             has(t, "bos_token + message['role']") || has(t, "'\\n\\nAssistant: ' + eos_token") ||
             has(t, "GPT4 Correct ") || (has(t, "USER: ") && has(t, "ASSISTANT: ")) ||
             (has(t, "### Instruction:") && has(t, "<|EOT|>")) ||
             (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>"))) {
    family = "other";  // zephyr, monarch, orion, openchat, vicuna, deepseek, command-r
  } else if (has(t, "<start_of_turn>")) {
    family = "gemma";
  } else if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) {
    family = "llama3";
  } else if (has(t, "[gMASK]sop") || has(t, "[gMASK]<sop>") || has(t, "<用户>")) {
    family = "other";  // chatglm3, chatglm4, minicpm
  } else if (has(t, "'Assistant: ' + message['content'] + eos_token")) {
    family = "deepseek2";
  } else if (has(t, "<｜Assistant｜>") && has(t, "<｜User｜>") && has(t, "<｜end▁of▁sentence｜>")) {
    family = "deepseek3";
  }
  if (family && !builtin_source(family).empty()) return std::string(family);
  return std::nullopt;
}

Result<ChatTemplate> ChatTemplate::from_source(std::string_view source, std::string origin) {
  KAMERA_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::parse(source, origin));
  ChatTemplate c;
  c.tmpl_ = std::make_shared<const jinja::Template>(std::move(t));
  c.name_ = std::move(origin);
  c.source_ = std::string(source);
  return c;
}

Result<ChatTemplate> ChatTemplate::named(std::string_view name) {
  const std::string_view src = builtin_source(name);
  if (src.empty()) {
    std::string known;
    for (const auto& n : builtin_names()) known += (known.empty() ? "" : ", ") + n;
    return make_error(ErrorCode::NotFound, "no built-in chat template '{}' (known: {})", name,
                      known);
  }
  KAMERA_ASSIGN_OR_RETURN(ChatTemplate c,
                          from_source(src, fmt::format("built-in chat template {}", name)));
  c.name_ = std::string(name);
  c.builtin_ = true;
  return c;
}

Result<ChatTemplate> ChatTemplate::from_gguf(std::string_view source) {
  if (source.empty()) {
    return make_error(ErrorCode::InvalidArgument, "the GGUF's tokenizer.chat_template is empty");
  }
  auto parsed = from_source(source, "tokenizer.chat_template");
  if (parsed.ok()) return parsed;
  const auto fallback = detect_builtin(source);
  if (!fallback) return parsed.error();
  log().warn("{}; using the built-in '{}' chat template instead", parsed.message(), *fallback);
  return named(*fallback);
}

Result<ChatTemplate> ChatTemplate::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(ErrorCode::NotFound, "chat template file {} cannot be opened", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return make_error(ErrorCode::Io, "chat template file {}: read failed", path);
  return from_source(ss.str(), path);
}

Result<ChatTemplate> ChatTemplate::from_arg(std::string_view name_or_path) {
  if (!builtin_source(name_or_path).empty()) return named(name_or_path);
  return from_file(std::string(name_or_path));
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                         const ChatRenderOptions& options) const {
  KAMERA_ASSIGN_OR_RETURN(jinja::Text t, render_text(messages, options));
  return std::move(t.str);
}

Result<jinja::Text> ChatTemplate::render_text(std::span<const ChatMessage> messages,
                                              const ChatRenderOptions& options,
                                              ContentTexts contents) const {
  const jinja::LiteralSpans* literal = options.literal ? &options.literal : nullptr;
  jinja::Array values;
  for (size_t i = 0; i < messages.size(); ++i)
    values.push_back(
        message_value(messages[i], literal, i < contents.size() ? &contents[i] : nullptr));
  jinja::Object ctx;
  ctx.set("messages", jinja::Value::array(std::move(values)));
  ctx.set("add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt));
  ctx.set("bos_token", jinja::Value::string(options.bos_token));
  ctx.set("eos_token", jinja::Value::string(options.eos_token));
  ctx.set("tools", options.tools.is_null() ? jinja::Value::none()
                                           : jinja::from_json(options.tools, literal));
  ctx.set("documents", jinja::Value::none());
  if (options.extra.is_object()) {
    for (const auto& [k, v] : options.extra.items()) ctx.set(k, jinja::from_json(v));
  }
  const std::time_t now = options.now != 0 ? options.now : std::time(nullptr);
  return tmpl_->render_text(ctx, options.limits, now);
}

Result<std::string> ChatTemplate::render_json(const nlohmann::ordered_json& messages,
                                              const ChatRenderOptions& options) const {
  KAMERA_ASSIGN_OR_RETURN(jinja::Text t, render_json_text(messages, options));
  return std::move(t.str);
}

Result<jinja::Text> ChatTemplate::render_json_text(const nlohmann::ordered_json& messages,
                                                   const ChatRenderOptions& options,
                                                   ContentTexts contents) const {
  if (!messages.is_array()) {
    return make_error(ErrorCode::InvalidArgument, "chat messages must be a JSON list, got {}",
                      messages.type_name());
  }
  std::vector<ChatMessage> list;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return make_error(ErrorCode::InvalidArgument,
                        "chat message {} must be an object with a string 'role'", i);
    }
    ChatMessage cm;
    cm.role = m["role"].get<std::string>();
    for (const auto& [k, v] : m.items()) {
      if (k == "role") continue;
      if (k == "content" && v.is_string()) {
        cm.content = v.get<std::string>();
      } else {
        cm.fields[k] = v;
      }
    }
    list.push_back(std::move(cm));
  }
  return render_text(list, options, contents);
}

}  // namespace kamera
