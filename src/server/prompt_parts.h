// The parts of a prompt from a request body: "prompt" of /v1/completions (a string or an array of
// text and chunk parts), or "messages" of chat (rendered by the chat template when there is one,
// else laid out as "role: content" lines).
//
// Control tokens come only from the template. Text a client wrote is literal: the spelling of
// <|im_end|> or <|im_start|> in it is tokenized as text, so no client field can close a turn or
// open a system turn. That holds for every string of the messages and tools (contents, names,
// tool-call names and arguments, tool_call_id, tool definitions with their parameter names and
// descriptions) and their keys: the template renders them as literal values (ChatRenderOptions::
// literal), and the renderer reports the bytes that print them wherever the template puts them,
// however it transforms them (tojson, trim, split, replace, ...: jinja/value.h). Each text part
// carries the byte ranges the template wrote itself (PromptPart::control), and only there are
// control tokens read (Tokenizer::encode_marked). Prompts and text parts of /v1/completions are
// literal as a whole. A chunk part inside a message is a piece of the content (jinja/value.h), and
// so is an image or video part, whose chunk the prompt takes from the request's RequestMedia by
// the part's place (messages[i].content[j]; the body is never rewritten, server/media_parts.h):
// the template prints it where it puts the content, and the rendered text comes back cut at it, by
// its span, not by any bytes; a client string may hold any byte. A template that changes a
// piece instead of printing it (upper, reverse, a slice through it) is refused by name.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "jinja/chat_template.h"
#include "serve/generation.h"
#include "toolcall/format.h"

namespace kamera {

// What a chat template renders besides the messages: the request's tools (null: none; tool_choice
// "none" renders none), and the template's tool-call format, which shapes the tool calls of
// assistant messages sent back (toolcall::prepare_messages).
struct ChatTools {
  nlohmann::ordered_json tools;
  std::optional<toolcall::Format> format;
};

// The variables a chat request passes to the template besides the messages and tools:
// "chat_template_kwargs" (an object; keys are names, values booleans, numbers, null or plain
// words, so that no client text reaches the prompt outside the literal messages; the template's
// own variables, messages, tools, add_generation_prompt, bos_token, eos_token, are refused), and
// "reasoning_effort" where the template has a switch: passed as the variable `reasoning_effort`
// where the template reads one, else mapped on Qwen3's `enable_thinking` ("none" and "minimal"
// switch the reasoning off, "low", "medium" and "high" on), else refused. Explicit
// chat_template_kwargs win over the mapping. On failure `param` names the field.
Result<nlohmann::ordered_json> template_variables(const nlohmann::ordered_json& body,
                                                  const ChatTemplate* tmpl,
                                                  std::string* param = nullptr);

// The parts of chat "messages" (OpenAI's: system, developer, user, assistant, tool; an
// assistant's content may be null with tool_calls, and it may carry the reasoning of its turn,
// "reasoning_content" or "reasoning", which the template renders or drops as it decides; a tool
// message's content is the client's, literal like every content), rendered with the request's
// template_variables. An image or video part that `media` read (prepared by server/media_parts.h;
// found by its place, RequestMedia::part) is its chunk, between its tower's vision delimiters
// (MediaPart::open_text, close_text): text the server writes, whose control tokens are read, as
// the template's own. So is a chunk part of the client's that names one of those chunks.
Result<std::vector<PromptPart>> chat_parts(const nlohmann::ordered_json& body,
                                           const ChatTemplate* tmpl,
                                           const ChatTools* tools = nullptr,
                                           const RequestMedia* media = nullptr);

// The prompts of /v1/completions "prompt": a string; token ids; a batch (strings, or token
// arrays), one prompt each; or parts (an array holding objects: text and chunk parts; an image
// or video part of `media`, its places messages[0].content[j], between its delimiters, as in
// chat_parts).
Result<std::vector<std::vector<PromptPart>>> completion_prompts(
    const nlohmann::ordered_json& prompt, int n_vocab, const RequestMedia* media = nullptr);

// The mini-VL's word prompt (docs/MINIVL.md), the format it was trained on: no chat template, no
// roles and no vision delimiters, [<bos>][frame]...[frame][question words]. A chat's messages give
// their contents in order (system, developer and user messages, one space between two; an
// assistant or tool message is refused: the model answers one question, it has no turns); a
// /v1/completions prompt gives its parts. The image parts (their chunks from `media`,
// server/media_parts.h) are the frames; all text comes after the last of them and is the
// question: words separated by whitespace, each one token, the vocabulary's piece "▁" + word. A
// word the vocabulary lacks is refused by name, and so is text before a frame (the model never
// saw any). The SentencePiece merges cannot spell these words (the vocabulary has no pieces
// shorter than a word), so the words are looked up whole.
class WordVocab {
 public:
  explicit WordVocab(const Tokenizer& tok);  // every normal piece "▁" + word
  Result<std::vector<int32_t>> encode(std::string_view text) const;

 private:
  std::unordered_map<std::string, int32_t> ids_;
};

Result<std::vector<PromptPart>> word_chat_parts(const nlohmann::ordered_json& body,
                                                const WordVocab& words,
                                                const RequestMedia* media = nullptr);
// A prompt's parts in the word prompt: the chunk parts, then one part of the question's ids.
Status to_word_prompt(std::vector<PromptPart>& parts, const WordVocab& words);

// Where else a text part yields control tokens when it is tokenized (besides its control
// ranges): all of it with the server's opt-in (--control-tokens-in-text).
struct ControlSpots {
  bool everywhere = false;
};

// The ids of a text part (first: the prompt's first part, as Tokenizer::encode_marked says).
std::vector<int32_t> text_part_ids(const Tokenizer& tok, const PromptPart& part, bool first,
                                   const ControlSpots& spots, size_t limit = SIZE_MAX);

}  // namespace kamera
