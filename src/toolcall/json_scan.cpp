#include "toolcall/json_scan.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace kamera::toolcall {

namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

}  // namespace

size_t JsonCallScanner::feed(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (done_ || failed_) return i;
    text_ += s[i];
    on_byte(s[i]);
  }
  return s.size();
}

std::string_view JsonCallScanner::args() const {
  if (!args_started()) return {};
  const size_t end = args_done() ? args_end_ : text_.size();
  return std::string_view(text_).substr(args_begin_, end - args_begin_);
}

void JsonCallScanner::value_ended() {
  const size_t end = text_.size() - (value_kind_primitive_ ? 1 : 0);
  const std::string_view v = std::string_view(text_).substr(value_begin_, end - value_begin_);
  if (key_ == "name") {
    auto j = nlohmann::json::parse(v, nullptr, false);
    if (j.is_string()) name_ = j.get<std::string>();
  }
  if (is_args_key(key_)) args_end_ = end;
  value_begin_ = std::string::npos;
  expect_ = Expect::Comma;
}

void JsonCallScanner::on_string_byte(char c) {
  if (escape_) {
    escape_ = false;
  } else if (c == '\\') {
    escape_ = true;
  } else if (c == '"') {
    in_string_ = false;
    if (depth_ == 1 && expect_ == Expect::Key) {
      auto j = nlohmann::json::parse(std::string_view(text_).substr(key_begin_), nullptr, false);
      key_ = j.is_string() ? j.get<std::string>() : "";
      const bool known = key_ == "name" || key_ == "type" || is_args_key(key_);
      if (keys_seen_++ == 0 && !known) failed_ = true;
      expect_ = Expect::Colon;
    } else if (depth_ == 1) {
      value_kind_primitive_ = false;
      value_ended();
    }
  }
}

void JsonCallScanner::on_nested_byte(char c) {
  if (c == '"') in_string_ = true;
  if (c == '{' || c == '[') ++depth_;
  if ((c == '}' || c == ']') && --depth_ == 1) {
    value_kind_primitive_ = false;
    value_ended();
  }
}

// A byte of the outer object, outside strings and nested values.
void JsonCallScanner::on_top_byte(char c) {
  const size_t pos = text_.size() - 1;
  switch (expect_) {
    case Expect::Open:
      depth_ = c == '{' ? 1 : 0;
      expect_ = Expect::Key;
      failed_ = c != '{';
      return;
    case Expect::Key:
      in_string_ = true;
      key_begin_ = pos;
      failed_ = c != '"';  // {} is not a call, a trailing comma is not JSON
      return;
    case Expect::Colon:
      expect_ = Expect::Value;
      failed_ = c != ':';
      return;
    case Expect::Value:
      value_begin_ = pos;
      if (is_args_key(key_)) args_begin_ = pos;
      if (c == '"') in_string_ = true;
      if (c == '{' || c == '[') depth_ = 2;
      return;
    case Expect::Comma:
      expect_ = Expect::Key;
      done_ = c == '}';
      failed_ = c != ',' && c != '}';
      if (done_) depth_ = 0;
      return;
  }
}

void JsonCallScanner::on_byte(char c) {
  if (in_string_) return on_string_byte(c);
  if (depth_ > 1) return on_nested_byte(c);  // inside a nested value of the outer object
  if (expect_ == Expect::Value && value_begin_ != std::string::npos) {  // a number, true, ...
    if (c != ',' && c != '}' && !is_ws(c)) return;
    value_kind_primitive_ = true;
    value_ended();
  }
  if (!is_ws(c)) on_top_byte(c);
}

bool JsonCallScanner::is_args_key(const std::string& key) const {
  return std::find(args_keys_.begin(), args_keys_.end(), key) != args_keys_.end();
}

}  // namespace kamera::toolcall
