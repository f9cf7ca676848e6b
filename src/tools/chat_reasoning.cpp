#include "tools/chat_reasoning.h"

namespace kamera::cli {

namespace {

constexpr std::string_view kDim = "\x1b[2m", kPlain = "\x1b[0m", kPrefix = "| ";

}  // namespace

ReasoningPrinter::ReasoningPrinter(ReasoningView view, bool split, bool opened, bool dim,
                                   std::FILE* out)
    : view_(view), dim_(dim), out_(out) {
  if (split && view != ReasoningView::Raw) splitter_.emplace(opened);
}

void ReasoningPrinter::feed(std::string_view text) {
  if (!splitter_) return write(text);
  print(splitter_->feed(text));
}

void ReasoningPrinter::finish() {
  if (splitter_) print(splitter_->finish());
  if (in_reasoning_ && dim_) write(kPlain);
  in_reasoning_ = false;
}

void ReasoningPrinter::print(const toolcall::ReasoningDelta& d) {
  if (!d.reasoning.empty() && view_ == ReasoningView::Show) reasoning(d.reasoning);
  if (!d.content.empty()) content(d.content);
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
}

void ReasoningPrinter::write(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

}  // namespace kamera::cli
