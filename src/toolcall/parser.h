// The model's output, as it streams, split into the message's text and its tool calls
// (toolcall/format.h gives each format's shape).
//
// feed() takes the next piece of generated text and returns what can be told now: text, and
// tool-call pieces in OpenAI's delta shape (a call's first piece has its index, id and name, the
// next ones add to its arguments' text). Text that may be the start of a call marker is held
// back until it is known not to be; so is whitespace just before a call (templates put a newline
// between a message's text and its first call) and between calls. finish() flushes at the end of
// the generation. Joining every delta gives the same message as content() and calls().
//
// A block that starts like a call but does not parse as one is text. A call cut short (the
// generation hit its token limit) stays a call with the arguments written so far; one cut before
// its name was complete is dropped, so no call marker is ever left in the text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "toolcall/format.h"
#include "toolcall/json_scan.h"

namespace kamera::toolcall {

struct ToolCall {
  std::string id, name;
  std::string arguments;  // JSON text, as the model wrote it
};

struct CallDelta {
  int index = 0;
  std::string id, name;   // in a call's first delta only
  std::string arguments;  // more of its arguments
};

struct Delta {
  std::string content;
  std::vector<CallDelta> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallParser {
 public:
  // Call ids are id_prefix + the call's index.
  explicit ToolCallParser(Format f, std::string id_prefix = "call_");

  Delta feed(std::string_view text);
  Delta finish();

  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State { Text, Json, AfterJson, DsCalls, DsName, DsArgs, DsAfterArgs, Done };

  void step(Delta& d, bool final);
  bool step_text(Delta& d, bool final);
  bool step_json(Delta& d, bool final);
  bool step_after_json(Delta& d, bool final);
  bool step_ds_calls(Delta& d, bool final);
  bool step_ds_name(Delta& d, bool final);
  bool step_ds_args(Delta& d, bool final);
  bool step_ds_after_args(Delta& d, bool final);

  void emit_text(Delta& d, std::string_view text);
  void flush_pending_ws(Delta& d);
  void open_call(Delta& d, const std::string& name);
  void add_args(Delta& d, std::string_view more);
  void json_failed(Delta& d);
  void cut_short(Delta& d);
  std::vector<std::string> args_keys() const;

  Format format_;
  std::string id_prefix_;
  State state_ = State::Text;
  std::string buf_;         // text not decided yet
  std::string pending_ws_;  // whitespace held before a possible call
  std::string raw_call_;    // the current call's text from its marker (it becomes text if it fails)
  bool started_ = false;    // llama3: some text came (its call is the whole message)
  JsonCallScanner scan_{{}};
  size_t args_sent_ = 0;
  bool call_open_ = false;
  std::string content_;
  std::vector<ToolCall> calls_;
};

}  // namespace kamera::toolcall
