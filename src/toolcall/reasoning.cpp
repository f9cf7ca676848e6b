#include "toolcall/reasoning.h"

namespace kamera::toolcall {

namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

size_t leading_ws(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// The longest end of `buf` that begins `marker`, shorter than it.
size_t held_prefix(std::string_view buf, std::string_view marker) {
  for (size_t k = std::min(buf.size(), marker.size() - 1); k > 0; --k)
    if (buf.substr(buf.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

}  // namespace

bool has_reasoning_markers(std::string_view source) {
  return source.find(kThinkOpen) != std::string_view::npos &&
         source.find(kThinkClose) != std::string_view::npos;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kThinkOpen);
  return open != std::string_view::npos && prompt.find(kThinkClose, open) == std::string_view::npos;
}

ReasoningSplitter::ReasoningSplitter(bool opened)
    : state_(opened ? State::Reasoning : State::Start) {}

ReasoningDelta ReasoningSplitter::feed(std::string_view text) {
  ReasoningDelta d;
  buf_ += text;
  read_reasoning_ = false;
  step(d, false);
  return d;
}

ReasoningDelta ReasoningSplitter::finish() {
  ReasoningDelta d;
  step(d, true);
  pending_ws_.clear();  // whitespace at the end of a reasoning cut short
  return d;
}

void ReasoningSplitter::step(ReasoningDelta& d, bool final) {
  for (bool more = true; more;) {
    switch (state_) {
      case State::Start:
        more = step_start(d, final);
        break;
      case State::Reasoning:
        more = step_reasoning(d, final);
        break;
      case State::AfterReasoning: {  // the whitespace after </think> is not the answer's
        buf_.erase(0, leading_ws(buf_));
        more = !buf_.empty();
        if (more) state_ = State::Content;
        break;
      }
      case State::Content:
        d.content += buf_;
        buf_.clear();
        more = false;
        break;
    }
  }
}

// Whitespace, then <think> (reasoning) or anything else (content, the whitespace included).
bool ReasoningSplitter::step_start(ReasoningDelta& d, bool final) {
  (void)d;
  const std::string_view rest = std::string_view(buf_).substr(leading_ws(buf_));
  if (rest.starts_with(kThinkOpen)) {
    buf_.erase(0, buf_.size() - rest.size() + kThinkOpen.size());
    state_ = State::Reasoning;
    return true;
  }
  if (!final && kThinkOpen.starts_with(rest)) return false;  // may still become <think>
  state_ = State::Content;
  return true;
}

bool ReasoningSplitter::step_reasoning(ReasoningDelta& d, bool final) {
  read_reasoning_ = true;
  const size_t close = buf_.find(kThinkClose);
  if (close != std::string::npos) {
    add_reasoning(d, std::string_view(buf_).substr(0, close));
    pending_ws_.clear();  // the whitespace before </think>
    buf_.erase(0, close + kThinkClose.size());
    state_ = State::AfterReasoning;
    return true;
  }
  const size_t keep = final ? 0 : held_prefix(buf_, kThinkClose);
  add_reasoning(d, std::string_view(buf_).substr(0, buf_.size() - keep));
  buf_.erase(0, buf_.size() - keep);
  return false;
}

// Reasoning text, without its leading whitespace; trailing whitespace waits for what follows.
void ReasoningSplitter::add_reasoning(ReasoningDelta& d, std::string_view text) {
  if (reasoning_.empty() && pending_ws_.empty()) text.remove_prefix(leading_ws(text));
  size_t end = text.size();
  while (end > 0 && is_ws(text[end - 1])) --end;
  if (end == 0) {
    if (!reasoning_.empty()) pending_ws_ += text;
    return;
  }
  const std::string out = pending_ws_ + std::string(text.substr(0, end));
  pending_ws_ = std::string(text.substr(end));
  d.reasoning += out;
  reasoning_ += out;
}

}  // namespace kamera::toolcall
