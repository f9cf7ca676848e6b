#include "toolcall/harmony.h"

#include <algorithm>
#include <array>

namespace kamera::toolcall {

namespace {

// What a header may begin with (after a message's end): a new <|start|>, the role, a recipient
// or the channel.
constexpr std::array<std::string_view, 4> kHeaderStarts = {kHarmonyStart, "assistant",
                                                           " to=", kHarmonyChannel};
// What ends a message's body.
constexpr std::array<std::string_view, 4> kBodyEnds = {kHarmonyEnd, kHarmonyStart, kHarmonyCall,
                                                       kHarmonyReturn};
// A header longer than this with no <|message|> is no header.
constexpr size_t kMaxHeader = 512;

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// Whether `buf` begins like a header: with one of its openings, or a beginning of one.
bool header_like(std::string_view buf) {
  return std::any_of(kHeaderStarts.begin(), kHeaderStarts.end(), [&](std::string_view m) {
    return starts_with(buf, m) || starts_with(m, buf);
  });
}

// The first end marker in `buf`: its position and length (npos when none).
std::pair<size_t, size_t> first_end(std::string_view buf) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (std::string_view m : kBodyEnds) {
    const size_t at = buf.find(m);
    if (at < best.first) best = {at, m.size()};
  }
  return best;
}

// How much of the end of `buf` may begin an end marker (held back while streaming).
size_t held_end(std::string_view buf) {
  size_t keep = 0;
  for (std::string_view m : kBodyEnds)
    for (size_t k = std::min(buf.size(), m.size() - 1); k > keep; --k)
      if (buf.substr(buf.size() - k) == m.substr(0, k)) {
        keep = k;
        break;
      }
  return keep;
}

// The word after the last `key` in `header` (up to a space or a marker), or "" when key is
// absent. The last: gpt-oss-20b sometimes writes a stray "<|channel|>commentary to=assistant"
// before the channel it means.
std::string word_after(std::string_view header, std::string_view key) {
  const size_t at = header.rfind(key);
  if (at == std::string_view::npos) return "";
  std::string_view rest = header.substr(at + key.size());
  size_t end = 0;
  while (end < rest.size() && rest[end] != ' ' && rest[end] != '<' && rest[end] != '\n') ++end;
  return std::string(rest.substr(0, end));
}

}  // namespace

std::string harmony_recipient(std::string_view header) {
  return word_after(header, " to=");
}

std::string harmony_channel(std::string_view header) {
  return word_after(header, kHarmonyChannel);
}

HarmonyParser::HarmonyParser(std::string id_prefix, bool split_reasoning)
    : id_prefix_(std::move(id_prefix)), split_(split_reasoning) {}

HarmonyDelta HarmonyParser::feed(std::string_view text) {
  HarmonyDelta d;
  read_reasoning_ = false;
  if (state_ == State::Done) return d;
  buf_ += text;
  step(d, false);
  return d;
}

HarmonyDelta HarmonyParser::finish() {
  HarmonyDelta d;
  if (state_ == State::Done) return d;
  step(d, true);
  state_ = State::Done;
  return d;
}

void HarmonyParser::step(HarmonyDelta& d, bool final) {
  for (bool more = true; more;)
    more = state_ == State::Header ? step_header(d, final) : step_body(d, final);
}

bool HarmonyParser::step_header(HarmonyDelta& d, bool final) {
  if (buf_.empty()) return false;
  if (raw_ || !header_like(buf_)) {  // no header: the rest is content as it is
    raw_ = true;
    kind_ = Kind::Content;
    state_ = State::Body;
    return true;
  }
  const size_t at = buf_.find(kHarmonyMessage);
  if (at == std::string::npos) {
    if (buf_.size() > kMaxHeader) {
      raw_ = true;
      return true;
    }
    if (final) buf_.clear();  // a header cut short: nothing to tell of it
    return false;
  }
  open(d, std::string_view(buf_).substr(0, at));
  buf_.erase(0, at + kHarmonyMessage.size());
  state_ = State::Body;
  return true;
}

// A message begins: what its header says it is.
void HarmonyParser::open(HarmonyDelta& d, std::string_view header) {
  const std::string to = harmony_recipient(header);
  constexpr std::string_view kFunctions = "functions.";
  if (starts_with(to, kFunctions) && to.size() > kFunctions.size()) {
    kind_ = Kind::Call;
    const int index = int(calls_.size());
    const std::string name = to.substr(kFunctions.size());
    calls_.push_back(ToolCall{id_prefix_ + std::to_string(index), name, ""});
    d.d.calls.push_back(CallDelta{index, calls_.back().id, name, ""});
  } else if (!to.empty() && to != "assistant" && to != "user") {
    kind_ = Kind::Dropped;  // a built-in tool's call (browser, python)
  } else {
    kind_ = harmony_channel(header) == "analysis" ? Kind::Reasoning : Kind::Content;
  }
  if (kind_ != Kind::Reasoning) return;
  read_reasoning_ = true;
  if (split_) return;
  kind_ = Kind::Content;  // told as written
  tell(d, std::string(kHarmonyChannel) + "analysis" + std::string(kHarmonyMessage));
  kind_ = Kind::RawAnalysis;
}

bool HarmonyParser::step_body(HarmonyDelta& d, bool final) {
  if (kind_ == Kind::Reasoning || kind_ == Kind::RawAnalysis) read_reasoning_ = true;
  if (raw_) {
    tell(d, buf_);
    buf_.clear();
    return false;
  }
  const auto [at, len] = first_end(buf_);
  if (at == std::string::npos) {
    const size_t keep = final ? 0 : held_end(buf_);
    tell(d, std::string_view(buf_).substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  tell(d, std::string_view(buf_).substr(0, at));
  if (kind_ == Kind::RawAnalysis) tell(d, kHarmonyEnd);
  // <|start|> is the next header's first marker: the header reads it.
  const bool start = std::string_view(buf_).substr(at, len) == kHarmonyStart;
  buf_.erase(0, start ? at : at + len);
  state_ = State::Header;
  return true;
}

void HarmonyParser::tell(HarmonyDelta& d, std::string_view text) {
  if (text.empty()) return;
  switch (kind_) {
    case Kind::Reasoning:
      d.reasoning += text;
      reasoning_ += text;
      break;
    case Kind::Content:
    case Kind::RawAnalysis:
      d.d.content += text;
      content_ += text;
      break;
    case Kind::Call: {
      const int index = int(calls_.size()) - 1;
      calls_.back().arguments += text;
      if (d.d.calls.empty() || d.d.calls.back().index != index)
        d.d.calls.push_back(CallDelta{index, "", "", ""});
      d.d.calls.back().arguments += text;
      break;
    }
    case Kind::Dropped:
      break;
  }
}

}  // namespace kamera::toolcall
