// The reasoning of thinking models (Qwen3, QwQ, DeepSeek-R1 and its distills), split out of the
// generated text by the markers they write: <think>reasoning</think>answer. The template of some
// of them opens <think> in the generation prompt (DeepSeek-R1's, Qwen3-Thinking's): then the
// output starts inside the reasoning and only closes it.
//
// ReasoningSplitter takes the output as it streams and tells each piece as reasoning or content
// (the answer, which the tool-call parser reads next). An opening <think> is read only at the
// start of the output (after whitespace); everything after the first </think> is content. The
// whitespace around the reasoning (the newlines the models write after <think>, before and after
// </think>) belongs to neither. Text that may be the start of a marker is held back until it is
// known not to be; finish() flushes it. An output cut inside its reasoning (the token limit) is
// all reasoning.
#pragma once

#include <string>
#include <string_view>

namespace kamera::toolcall {

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

// Whether a chat template writes reasoning markers (its model thinks in <think> blocks).
bool has_reasoning_markers(std::string_view template_source);
// Whether a rendered prompt ends inside a reasoning block: it opened <think> after the last
// </think>.
bool prompt_opens_reasoning(std::string_view prompt);

struct ReasoningDelta {
  std::string reasoning, content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningSplitter {
 public:
  // opened: the prompt opened the reasoning (prompt_opens_reasoning).
  explicit ReasoningSplitter(bool opened);

  ReasoningDelta feed(std::string_view text);
  ReasoningDelta finish();

  const std::string& reasoning() const { return reasoning_; }
  // Whether the output's start is still undecided (reasoning or not: text that may begin <think>).
  bool undecided() const { return state_ == State::Start; }
  // Whether the last feed's text was read inside the reasoning (its markers included).
  bool read_reasoning() const { return read_reasoning_; }

 private:
  enum class State { Start, Reasoning, AfterReasoning, Content };
  void step(ReasoningDelta& d, bool final);
  bool step_start(ReasoningDelta& d, bool final);
  bool step_reasoning(ReasoningDelta& d, bool final);
  void add_reasoning(ReasoningDelta& d, std::string_view text);

  State state_;
  std::string buf_;         // text not told yet
  std::string pending_ws_;  // whitespace inside the reasoning, told once more follows
  std::string reasoning_;
  bool read_reasoning_ = false;
};

}  // namespace kamera::toolcall
