// How `kamera chat` shows a thinking model's reasoning (the <think> block its chat template has
// it write, or opens for it in the generation prompt): split off the reply as it streams by the
// server's parser (toolcall/reasoning.h), printed above the answer with every line prefixed by
// "| " (dimmed on a terminal; "> " is the input prompt), or hidden, or left in the reply as the
// model wrote it.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "toolcall/reasoning.h"

namespace kamera::cli {

enum class ReasoningView { Show, Hide, Raw };

class ReasoningPrinter {
 public:
  // split: the template writes reasoning markers and the view is not Raw; opened: the turn's
  // prompt opened the reasoning (toolcall::prompt_opens_reasoning); dim: a terminal.
  ReasoningPrinter(ReasoningView view, bool split, bool opened, bool dim, std::FILE* out);
  void feed(std::string_view text);
  void finish();  // prints what the splitter held back, and ends the dimming

 private:
  void print(const toolcall::ReasoningDelta& d);
  void reasoning(std::string_view text);
  void content(std::string_view text);
  void write(std::string_view text);

  ReasoningView view_;
  bool dim_;
  std::FILE* out_;
  std::optional<toolcall::ReasoningSplitter> splitter_;
  bool in_reasoning_ = false;  // reasoning printed, the answer not begun
  bool line_start_ = true;     // the next reasoning character begins a line
};

}  // namespace kamera::cli
