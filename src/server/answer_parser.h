// One choice's generated text as every API tells it: a thinking model's reasoning split out
// (toolcall/reasoning.h), then the answer's text and tool calls (toolcall/parser.h), piece by
// piece as the text streams; or, for gpt-oss's harmony format, all three from its channels
// (toolcall/harmony.h). Shared by the translators of chat completions, Responses and
// Messages (completion_sink.h, responses_api.h, messages_api.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "toolcall/harmony.h"
#include "toolcall/parser.h"
#include "toolcall/reasoning.h"

namespace kamera {

// A choice's next text, parsed: reasoning, and the answer's text and tool-call pieces.
struct AnswerPiece {
  std::string reasoning;
  toolcall::Delta d;
  bool empty() const { return reasoning.empty() && d.empty(); }
};

class AnswerParser {
 public:
  // calls: parse tool calls of this format (ids id_prefix + index); reasoning: split it out
  // (true: the prompt opened it). Harmony is parsed whenever it is the format (its channels are
  // the message's structure); without `reasoning` its analysis text is told as content.
  AnswerParser(std::optional<toolcall::Format> calls, std::optional<bool> reasoning,
               std::string id_prefix);
  // `tokens`: how many generated tokens the text is (counted in reasoning_tokens() when it is
  // read inside the reasoning, its markers included).
  AnswerPiece feed(std::string text, int64_t tokens = 0);
  AnswerPiece finish();
  // Tokens generated inside the reasoning (usage's reasoning_tokens).
  int64_t reasoning_tokens() const { return reasoning_tokens_; }
  // Whether text is held back until more comes (finish() must be called at the end).
  bool parses() const { return calls_ || think_ || harmony_; }
  const std::vector<toolcall::ToolCall>& calls() const;

 private:
  AnswerPiece next(std::string text, bool final);

  std::unique_ptr<toolcall::ToolCallParser> calls_;
  std::unique_ptr<toolcall::ReasoningSplitter> think_;
  std::unique_ptr<toolcall::HarmonyParser> harmony_;
  bool split_harmony_ = false;  // harmony's analysis is reasoning (else content)
  AnswerPiece next_harmony(const std::string& text, bool final);
  int64_t reasoning_tokens_ = 0;
  int64_t undecided_tokens_ = 0;  // read while the splitter could not tell yet
};

}  // namespace kamera
