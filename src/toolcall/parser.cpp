#include "toolcall/parser.h"

#include <nlohmann/json.hpp>

namespace kamera::toolcall {

namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The longest end of `buf` that begins `marker` (so may be the start of one), shorter than it.
size_t held_prefix(std::string_view buf, std::string_view marker) {
  for (size_t k = std::min(buf.size(), marker.size() - 1); k > 0; --k)
    if (buf.substr(buf.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

// Whether buf, after its leading whitespace, is a proper beginning of marker.
bool may_become(std::string_view buf, std::string_view marker) {
  return buf.size() < marker.size() && marker.substr(0, buf.size()) == buf;
}

void skip_ws(std::string& buf, std::string_view also = "") {
  size_t i = 0;
  while (i < buf.size() && (is_ws(buf[i]) || also.find(buf[i]) != std::string_view::npos)) ++i;
  buf.erase(0, i);
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

}  // namespace

ToolCallParser::ToolCallParser(Format f, std::string id_prefix)
    : format_(f), id_prefix_(std::move(id_prefix)) {}

std::vector<std::string> ToolCallParser::args_keys() const {
  if (format_ == Format::Llama3) return {"parameters", "arguments"};
  return {"arguments"};
}

Delta ToolCallParser::feed(std::string_view text) {
  Delta d;
  if (state_ == State::Done) return d;
  buf_ += text;
  step(d, false);
  return d;
}

Delta ToolCallParser::finish() {
  Delta d;
  if (state_ == State::Done) return d;
  step(d, true);
  if (calls_.empty()) flush_pending_ws(d);
  state_ = State::Done;
  return d;
}

void ToolCallParser::step(Delta& d, bool final) {
  for (bool more = true; more;) {
    switch (state_) {
      case State::Text:
        more = step_text(d, final);
        break;
      case State::Json:
        more = step_json(d, final);
        break;
      case State::AfterJson:
        more = step_after_json(d, final);
        break;
      case State::DsCalls:
        more = step_ds_calls(d, final);
        break;
      case State::DsName:
        more = step_ds_name(d, final);
        break;
      case State::DsArgs:
        more = step_ds_args(d, final);
        break;
      case State::DsAfterArgs:
        more = step_ds_after_args(d, final);
        break;
      case State::Done:
        more = false;
        break;
    }
  }
}

void ToolCallParser::emit_text(Delta& d, std::string_view text) {
  size_t end = text.size();
  while (end > 0 && is_ws(text[end - 1])) --end;
  if (end == 0) {
    pending_ws_ += text;
    return;
  }
  const std::string out = pending_ws_ + std::string(text.substr(0, end));
  pending_ws_ = std::string(text.substr(end));
  d.content += out;
  content_ += out;
}

void ToolCallParser::flush_pending_ws(Delta& d) {
  d.content += pending_ws_;
  content_ += pending_ws_;
  pending_ws_.clear();
}

bool ToolCallParser::step_text(Delta& d, bool final) {
  if (format_ == Format::Llama3) {  // a call is the whole message: it starts with '{'
    if (started_) {
      emit_text(d, buf_);
      buf_.clear();
      return false;
    }
    size_t i = 0;
    while (i < buf_.size() && is_ws(buf_[i])) ++i;
    std::string_view rest = std::string_view(buf_).substr(i);
    constexpr std::string_view kPythonTag = "<|python_tag|>";
    if (starts_with(rest, kPythonTag)) rest.remove_prefix(kPythonTag.size());
    if (rest.empty() || (!final && may_become(rest, kPythonTag))) return false;
    started_ = true;
    if (rest[0] != '{') return true;  // text from here on
    pending_ws_ += buf_.substr(0, i);
    buf_ = std::string(rest);
    raw_call_.clear();
    scan_ = JsonCallScanner(args_keys());
    state_ = State::Json;
    return true;
  }
  const std::string_view marker = format_ == Format::Hermes ? kHermesOpen : kDsCallsBegin;
  const size_t pos = buf_.find(marker);
  if (pos == std::string::npos) {
    const size_t keep = final ? 0 : held_prefix(buf_, marker);
    emit_text(d, std::string_view(buf_).substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  emit_text(d, std::string_view(buf_).substr(0, pos));
  // The newline a template puts before a call is not text (unless the call fails to parse).
  raw_call_ = pending_ws_ + std::string(marker);
  pending_ws_.clear();
  buf_.erase(0, pos + marker.size());
  if (format_ == Format::Hermes) {
    scan_ = JsonCallScanner(args_keys());
    state_ = State::Json;
  } else {
    state_ = State::DsCalls;
  }
  return true;
}

void ToolCallParser::open_call(Delta& d, const std::string& name) {
  const int index = int(calls_.size());
  calls_.push_back(ToolCall{id_prefix_ + std::to_string(index), name, ""});
  d.calls.push_back(CallDelta{index, calls_.back().id, name, ""});
  call_open_ = true;
  args_sent_ = 0;
}

void ToolCallParser::add_args(Delta& d, std::string_view more) {
  if (more.empty() || !call_open_) return;
  const int index = int(calls_.size() - 1);
  calls_.back().arguments += more;
  if (d.calls.empty() || d.calls.back().index != index)
    d.calls.push_back(CallDelta{index, "", "", ""});
  d.calls.back().arguments += more;
  args_sent_ += more.size();
}

void ToolCallParser::json_failed(Delta& d) {
  if (call_open_) {  // its name went out already: the call stays, as far as it got
    call_open_ = false;
  } else {
    emit_text(d, raw_call_);
  }
  raw_call_.clear();
  started_ = true;
  state_ = State::Text;
}

// The generation ended inside a call: one whose name went out stays, as far as it got; one cut
// before its name is dropped, marker and all (it was no text, and no call can be told of it).
void ToolCallParser::cut_short(Delta& d) {
  if (call_open_) return json_failed(d);
  raw_call_.clear();
  started_ = true;
  state_ = State::Text;
}

bool ToolCallParser::step_json(Delta& d, bool final) {
  const size_t n = scan_.feed(buf_);
  raw_call_ += buf_.substr(0, n);
  buf_.erase(0, n);
  if (scan_.failed()) {
    json_failed(d);
    return true;
  }
  if (scan_.name() && !call_open_) open_call(d, *scan_.name());
  const std::string_view args = scan_.args();
  if (call_open_ && !args.empty() && args[0] != '"') add_args(d, args.substr(args_sent_));
  if (call_open_ && scan_.args_done() && !args.empty() && args[0] == '"' && args_sent_ == 0) {
    auto j = nlohmann::json::parse(args, nullptr, false);  // arguments written as a string
    add_args(d, j.is_string() ? j.get<std::string>() : std::string(args));
  }
  if (!scan_.done()) {
    if (final) cut_short(d);
    return final;
  }
  if (!call_open_) {
    json_failed(d);
    return true;
  }
  if (!scan_.args_started()) add_args(d, "{}");
  raw_call_.clear();
  state_ = State::AfterJson;
  return true;
}

bool ToolCallParser::step_after_json(Delta& d, bool final) {
  (void)d;
  skip_ws(buf_, format_ == Format::Llama3 ? ";" : "");
  if (buf_.empty() && !final) return false;
  call_open_ = false;
  if (format_ == Format::Hermes) {
    if (!final && may_become(buf_, kHermesClose)) return false;
    if (starts_with(buf_, kHermesClose)) buf_.erase(0, kHermesClose.size());
    state_ = State::Text;
    return true;
  }
  if (!buf_.empty() && buf_[0] == '{') {  // llama3: another call
    scan_ = JsonCallScanner(args_keys());
    state_ = State::Json;
    return true;
  }
  state_ = State::Text;
  return !buf_.empty();
}

bool ToolCallParser::step_ds_calls(Delta& d, bool final) {
  skip_ws(buf_);
  if (starts_with(buf_, kDsCallsEnd)) {
    buf_.erase(0, kDsCallsEnd.size());
    state_ = State::Text;
    return true;
  }
  if (starts_with(buf_, kDsCallBegin)) {
    buf_.erase(0, kDsCallBegin.size());
    state_ = State::DsName;
    return true;
  }
  if (!final && (buf_.empty() || may_become(buf_, kDsCallsEnd) || may_become(buf_, kDsCallBegin)))
    return false;
  if (calls_.empty()) emit_text(d, raw_call_);  // no call after the marker: it was text
  raw_call_.clear();
  state_ = State::Text;
  return true;
}

bool ToolCallParser::step_ds_name(Delta& d, bool final) {
  const size_t sep = buf_.find(kDsSep);
  const size_t open = sep == std::string::npos ? sep : buf_.find(kDsArgsOpen, sep);
  if (open == std::string::npos) {
    if (final && sep != std::string::npos) open_call(d, buf_.substr(sep + kDsSep.size()));
    return false;
  }
  open_call(d, buf_.substr(sep + kDsSep.size(), open - sep - kDsSep.size()));
  buf_.erase(0, open + kDsArgsOpen.size());
  state_ = State::DsArgs;
  return true;
}

bool ToolCallParser::step_ds_args(Delta& d, bool final) {
  const size_t pos = buf_.find(kDsArgsClose);
  if (pos == std::string::npos) {
    const size_t keep = final ? 0 : held_prefix(buf_, kDsArgsClose);
    add_args(d, std::string_view(buf_).substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  add_args(d, std::string_view(buf_).substr(0, pos));
  buf_.erase(0, pos + kDsArgsClose.size());
  state_ = State::DsAfterArgs;
  return true;
}

bool ToolCallParser::step_ds_after_args(Delta& d, bool final) {
  (void)d;
  skip_ws(buf_);
  if (!final && (buf_.empty() || may_become(buf_, kDsCallEnd))) return false;
  if (starts_with(buf_, kDsCallEnd)) buf_.erase(0, kDsCallEnd.size());
  call_open_ = false;
  state_ = State::DsCalls;
  return true;
}

}  // namespace kamera::toolcall
