// How `kamera chat` shows a thinking model's reasoning (the <think> block its chat template has
// it write, or opens for it in the generation prompt; gpt-oss's harmony analysis channel): split
// off the reply as it streams by the server's parsers (toolcall/reasoning.h, toolcall/harmony.h),
// printed above the answer with every line prefixed by "| " (dimmed on a terminal; "> " is the
// input prompt), or hidden, or left in the reply as the model wrote it. A harmony reply's final
// (and commentary) channel is the answer, without its markers; a tool call it writes is shown as
// "[call NAME ARGUMENTS]" on a line of its own.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "jinja/chat_template.h"
#include "toolcall/harmony.h"
#include "toolcall/reasoning.h"

namespace kamera::cli {

enum class ReasoningView { Show, Hide, Raw };

class ReasoningPrinter {
 public:
  // template_source: the chat template (it writes <think> markers, or harmony's channels, or
  // neither: the reply is printed as it is); opened: the turn's prompt opened the reasoning
  // (toolcall::prompt_opens_reasoning); dim: a terminal.
  ReasoningPrinter(ReasoningView view, std::string_view template_source, bool opened, bool dim,
                   std::FILE* out);
  void feed(std::string_view text);
  void finish();  // prints what the splitter held back, and ends the dimming

 private:
  void print(const toolcall::ReasoningDelta& d);
  void print(const toolcall::HarmonyDelta& d);
  void close_call();  // ends the tool call being printed, if any
  void reasoning(std::string_view text);
  void content(std::string_view text);
  void write(std::string_view text);

  ReasoningView view_;
  bool dim_;
  std::FILE* out_;
  std::optional<toolcall::ReasoningSplitter> splitter_;
  std::optional<toolcall::HarmonyParser> harmony_;
  bool in_reasoning_ = false;    // reasoning printed, the answer not begun
  bool line_start_ = true;       // the next reasoning character begins a line
  bool printed_answer_ = false;  // some of the answer was printed
  bool in_call_ = false;         // a harmony tool call's arguments are being printed
};

// The reply as the conversation keeps it for the next turn's prompt: for a harmony template
// (gpt-oss), the final channel as the content and the analysis as "thinking" (the template
// refuses a content that holds <|channel|> markers, and drops past analyses itself); nullopt for
// other templates (the reply is kept as it is).
std::optional<ChatMessage> harmony_history(std::string_view template_source,
                                           std::string_view reply);

}  // namespace kamera::cli
