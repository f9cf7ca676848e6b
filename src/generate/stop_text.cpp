#include "generate/stop_text.h"

#include <algorithm>

namespace kamera {

StopText::StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
  for (const std::string& s : stops_) longest_ = std::max(longest_, s.size());
}

// The longest suffix of the unshown text that is a proper prefix of a stop string.
size_t StopText::held_suffix() const {
  const size_t unshown = text_.size() - shown_;
  for (size_t k = std::min(unshown, longest_ ? longest_ - 1 : 0); k > 0; --k) {
    const std::string_view tail = std::string_view(text_).substr(text_.size() - k);
    for (const std::string& s : stops_)
      if (s.size() > k && std::string_view(s).substr(0, k) == tail) return k;
  }
  return 0;
}

std::string StopText::push(std::string_view s) {
  if (stopped_) return {};
  // A stop can only begin in the unshown text: a shown byte was never the start of a stop prefix.
  const size_t from = shown_;
  text_ += s;
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_)
    if (const size_t at = text_.find(stop, from); at < cut) cut = at, matched_ = stop;
  if (cut != std::string::npos) {
    stopped_ = true;
    text_.resize(cut);
  }
  const size_t end = stopped_ ? text_.size() : text_.size() - held_suffix();
  std::string out = text_.substr(shown_, end - shown_);
  shown_ = end;
  return out;
}

std::string StopText::flush() {
  std::string out = text_.substr(shown_);
  shown_ = text_.size();
  return out;
}

}  // namespace kamera
