#include "tools/chat_reasoning.h"

#include "toolcall/format.h"

namespace kamera::cli {

namespace {

constexpr std::string_view kDim = "\x1b[2m", kPlain = "\x1b[0m", kPrefix = "| ";

}  // namespace

ReasoningPrinter::ReasoningPrinter(ReasoningView view, std::string_view template_source,
                                   bool opened, bool dim, std::FILE* out)
    : view_(view), dim_(dim), out_(out) {
  if (view == ReasoningView::Raw) return;
  if (toolcall::detect_format(template_source) == toolcall::Format::Harmony) {
    harmony_.emplace();
  } else if (toolcall::has_reasoning_markers(template_source)) {
    splitter_.emplace(opened);
  }
}

void ReasoningPrinter::feed(std::string_view text) {
  if (harmony_) return print(harmony_->feed(text));
  if (!splitter_) return write(text);
  print(splitter_->feed(text));
}

void ReasoningPrinter::finish() {
  if (harmony_) {
    print(harmony_->finish());
    close_call();
  }
  if (splitter_) print(splitter_->finish());
  if (in_reasoning_ && dim_) write(kPlain);
  in_reasoning_ = false;
}

void ReasoningPrinter::print(const toolcall::ReasoningDelta& d) {
  if (!d.reasoning.empty() && view_ == ReasoningView::Show) reasoning(d.reasoning);
  if (!d.content.empty()) content(d.content);
}

void ReasoningPrinter::print(const toolcall::HarmonyDelta& d) {
  if (!d.reasoning.empty() && view_ == ReasoningView::Show) reasoning(d.reasoning);
  if (!d.d.content.empty()) {
    close_call();
    content(d.d.content);
  }
  for (const toolcall::CallDelta& c : d.d.calls) {
    if (!c.name.empty()) {  // a call's first delta: on a line of its own
      close_call();
      content(printed_answer_ ? "\n[call " + c.name + " " : "[call " + c.name + " ");
      in_call_ = true;
    }
    content(c.arguments);
  }
}

void ReasoningPrinter::close_call() {
  if (in_call_) write("]");
  in_call_ = false;
}

void ReasoningPrinter::reasoning(std::string_view text) {
  if (!in_reasoning_ && dim_) write(kDim);
  in_reasoning_ = true;
  for (size_t at = 0; at < text.size();) {
    if (line_start_) write(kPrefix);
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    write(text.substr(at, end - at));
    line_start_ = nl != std::string_view::npos;
    at = end;
  }
}

void ReasoningPrinter::content(std::string_view text) {
  if (in_reasoning_) {  // the answer starts on a line of its own, not dimmed
    if (dim_) write(kPlain);
    write(line_start_ ? "\n" : "\n\n");
    in_reasoning_ = false;
  }
  write(text);
  printed_answer_ = printed_answer_ || !text.empty();
}

void ReasoningPrinter::write(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

std::optional<ChatMessage> harmony_history(std::string_view template_source,
                                           std::string_view reply) {
  if (toolcall::detect_format(template_source) != toolcall::Format::Harmony) return std::nullopt;
  toolcall::HarmonyParser h;
  h.feed(reply);
  h.finish();
  ChatMessage m{"assistant", h.content()};
  if (!h.reasoning().empty()) m.fields["thinking"] = h.reasoning();
  return m;
}

}  // namespace kamera::cli
