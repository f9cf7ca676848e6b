// gpt-oss's output in OpenAI's harmony format, as it streams: a sequence of messages, each a
// header, <|message|>, the body, and an end marker (<|end|>, or <|call|> / <|return|>, which end
// the generation; a new <|start|> also ends the message before it). The generation prompt ends
// with <|start|>assistant, so the first header comes without them:
//
//   <|channel|>analysis<|message|>R<|end|>                                  reasoning R
//   <|start|>assistant<|channel|>final<|message|>C<|return|>                content C
//   <|channel|>commentary<|message|>C<|end|>                                content C (a preamble)
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>A<|call|>
//                                                                           a call of NAME with A
//   <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>A<|call|>
//                                                                           the same (the recipient
//                                                                           in the role header, as
//                                                                           the template writes it)
//
// A message to another recipient (gpt-oss's built-in browser or python tools) is dropped. Output
// that does not start like a header (a model that ignores the format) is content as it is. A
// header cut short by the token limit is dropped; a body cut short keeps what came (a call whose
// header was read stays a call with the arguments written so far).
//
// feed() returns what can be told now, in the shapes of toolcall/parser.h; text that may be the
// start of a marker is held back until it is known not to be. Joining every delta gives the same
// reasoning, content and calls as reasoning(), content() and calls().
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "toolcall/parser.h"

namespace kamera::toolcall {

struct HarmonyDelta {
  std::string reasoning;
  Delta d;
  bool empty() const { return reasoning.empty() && d.empty(); }
};

class HarmonyParser {
 public:
  // Call ids are id_prefix + the call's index. split_reasoning false: an analysis message is
  // content, as written with its markers (as llama.cpp's --reasoning-format none tells it).
  explicit HarmonyParser(std::string id_prefix = "call_", bool split_reasoning = true);

  HarmonyDelta feed(std::string_view text);
  HarmonyDelta finish();

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& calls() const { return calls_; }
  // Whether the last feed's text was read in an analysis message (its header included).
  bool read_reasoning() const { return read_reasoning_; }

 private:
  enum class Kind { Reasoning, RawAnalysis, Content, Call, Dropped };
  enum class State { Header, Body, Done };

  void step(HarmonyDelta& d, bool final);
  bool step_header(HarmonyDelta& d, bool final);
  bool step_body(HarmonyDelta& d, bool final);
  void open(HarmonyDelta& d, std::string_view header);
  void tell(HarmonyDelta& d, std::string_view text);

  std::string id_prefix_;
  bool split_;
  State state_ = State::Header;
  Kind kind_ = Kind::Content;
  bool raw_ = false;  // the output did not start with a header: all of it is content
  std::string buf_;   // text not decided yet
  std::string reasoning_, content_;
  std::vector<ToolCall> calls_;
  bool read_reasoning_ = false;
};

// Whether `header` (the text before <|message|>, the optional <|start|> and role included)
// names a recipient, and which: "functions.get_weather" for
// "<|channel|>commentary to=functions.get_weather <|constrain|>json". Empty when none.
std::string harmony_recipient(std::string_view header);
// The channel a header names ("analysis", "commentary", "final"); empty when none.
std::string harmony_channel(std::string_view header);

}  // namespace kamera::toolcall
