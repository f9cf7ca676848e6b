// Reads a tool call written as one JSON object ({"name": "f", "arguments": {...}}) as it
// streams in: the name once its string is complete, and the arguments' text as it grows, so
// that a streamed response can send the call in pieces (OpenAI's tool-call deltas).
//
// Only the top level is interpreted: strings (with escapes) and nesting are tracked byte by
// byte, keys and values of the outer object are cut out. The first key must be the name, "type"
// or an arguments key, which lets plain JSON content (a reply that happens to be an object) be told
// from a call early.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kamera::toolcall {

class JsonCallScanner {
 public:
  explicit JsonCallScanner(std::vector<std::string> args_keys) : args_keys_(std::move(args_keys)) {}

  // Reads more text; returns how much of it was read (less than all once the object closed).
  size_t feed(std::string_view s);
  bool done() const { return done_; }
  bool failed() const { return failed_; }

  const std::optional<std::string>& name() const { return name_; }
  // The arguments' text so far (it grows until args_done()).
  std::string_view args() const;
  bool args_started() const { return args_begin_ != std::string::npos; }
  bool args_done() const { return args_end_ != std::string::npos; }
  const std::string& text() const { return text_; }

 private:
  void on_byte(char c);
  void on_string_byte(char c);
  void on_nested_byte(char c);
  void on_top_byte(char c);
  void value_ended();
  bool is_args_key(const std::string& key) const;

  std::vector<std::string> args_keys_;
  std::string text_;
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
  bool done_ = false, failed_ = false;
  // Top level: where the current key and value start in text_.
  enum class Expect { Open, Key, Colon, Value, Comma } expect_ = Expect::Open;
  size_t key_begin_ = 0, value_begin_ = std::string::npos;
  bool value_kind_primitive_ = false;  // a number or literal: ended by the byte after it
  std::string key_;
  int keys_seen_ = 0;
  std::optional<std::string> name_;
  size_t args_begin_ = std::string::npos, args_end_ = std::string::npos;
};

}  // namespace kamera::toolcall
