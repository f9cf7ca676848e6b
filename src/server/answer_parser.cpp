#include "server/answer_parser.h"

namespace kamera {

AnswerParser::AnswerParser(std::optional<toolcall::Format> calls, std::optional<bool> reasoning,
                           std::string id_prefix) {
  if (calls == toolcall::Format::Harmony) {
    split_harmony_ = reasoning.has_value();
    harmony_ = std::make_unique<toolcall::HarmonyParser>(std::move(id_prefix), split_harmony_);
    return;
  }
  if (calls) calls_ = std::make_unique<toolcall::ToolCallParser>(*calls, std::move(id_prefix));
  if (reasoning) think_ = std::make_unique<toolcall::ReasoningSplitter>(*reasoning);
}

const std::vector<toolcall::ToolCall>& AnswerParser::calls() const {
  static const std::vector<toolcall::ToolCall> none;
  if (harmony_) return harmony_->calls();
  return calls_ ? calls_->calls() : none;
}

AnswerPiece AnswerParser::feed(std::string text, int64_t tokens) {
  AnswerPiece p = next(std::move(text), false);
  if (harmony_ && harmony_->read_reasoning() && split_harmony_) reasoning_tokens_ += tokens;
  if (!think_) return p;
  undecided_tokens_ += tokens;
  if (think_->undecided()) return p;
  if (think_->read_reasoning()) reasoning_tokens_ += undecided_tokens_;
  undecided_tokens_ = 0;
  return p;
}

AnswerPiece AnswerParser::finish() {
  return next("", true);
}

AnswerPiece AnswerParser::next_harmony(const std::string& text, bool final) {
  toolcall::HarmonyDelta h = harmony_->feed(text);
  if (final) {
    toolcall::HarmonyDelta rest = harmony_->finish();
    h.reasoning += rest.reasoning;
    h.d.content += rest.d.content;
    for (auto& call : rest.d.calls) h.d.calls.push_back(std::move(call));
  }
  return AnswerPiece{std::move(h.reasoning), std::move(h.d)};
}

AnswerPiece AnswerParser::next(std::string text, bool final) {
  if (harmony_) return next_harmony(text, final);
  AnswerPiece p;
  if (think_) {
    toolcall::ReasoningDelta r = think_->feed(text);
    if (final) {
      toolcall::ReasoningDelta rest = think_->finish();
      r.reasoning += rest.reasoning;
      r.content += rest.content;
    }
    p.reasoning = std::move(r.reasoning);
    text = std::move(r.content);
  }
  if (!calls_) {
    p.d.content = std::move(text);
    return p;
  }
  p.d = calls_->feed(text);
  if (final) {
    toolcall::Delta rest = calls_->finish();
    p.d.content += rest.content;
    for (auto& call : rest.calls) p.d.calls.push_back(std::move(call));
  }
  return p;
}

}  // namespace kamera
