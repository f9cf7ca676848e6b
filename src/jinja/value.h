// The values a Jinja template computes with, and the Python semantics it gives them: str() and
// repr() text, truthiness, equality and ordering, and json.dumps() text for the tojson filter.
//
// Chat templates were written for Python's jinja2, so every rule here follows Python: `{{ none }}`
// prints "None", `{{ [1, 'a'] }}` prints "[1, 'a']", 1 == 1.0, floats print as Python's repr
// (0.1, 1e-05, 1e+20). Arrays and objects are shared by reference, as Python lists and dicts are;
// objects keep their keys in insertion order (as a Python dict and a JSON document do).
//
// Strings also carry which of their bytes are literal: text that came from the caller's literal
// values (from_json with a LiteralSpans, e.g. what a client sent) rather than from the template.
// Python has no such notion; it changes no string's value, only what a renderer reports of it
// (Text::literal), so the tokenizer can read control tokens only where the template wrote them.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kamera::jinja {

class Value;

// Bytes [begin, end) of a string; `piece` 0 for literal bytes, else the bytes of an opaque piece
// the caller put into a string (Text::append_piece: a chunk part of a message's content).
struct Span {
  size_t begin = 0, end = 0;
  uint32_t piece = 0;
};
// A string's literal bytes: sorted, disjoint spans, none empty and none touching the next of the
// same kind. Pieces are literal too (a client's text never prints as the template's own).
using Spans = std::vector<Span>;

// A piece prints as these bytes (kPieceText), in a span of its own: what the caller gets back is
// the span, never a search for the bytes, so any string may hold them (and any byte). An
// operation that copies a piece's bytes keeps its span (print, concatenation, strip, split,
// replace elsewhere, tojson, escape: no byte of it is escaped); one that cannot tell where its
// output came from (reverse, ensure_ascii, a filter that rebuilds the string) marks the result
// kBrokenPiece; one that cuts or changes its bytes (a slice inside it, upper) leaves a span that
// is not kPieceText whole. Either way pieces_of refuses the text.
inline constexpr std::string_view kPieceText = "(chunk)";
inline constexpr uint32_t kBrokenPiece = UINT32_MAX;

// A string with its literal spans, as strings are built. Every operation that builds a string
// from strings carries the spans along (concatenation, slices, strip, split, replace, escapes,
// tojson, ...); where one cannot tell which output bytes came from which input bytes, the whole
// result is literal if any input byte was (never the other way).
struct Text {
  std::string str;
  Spans literal;

  void append(std::string_view s, bool is_literal = false);
  void append(std::string_view s, const Span* like);  // literal or a piece's bytes as `like`
                                                      // (null: the template's own)
  void append_piece(uint32_t piece);                  // kPieceText as piece `piece` (> 0)
  // Bytes [begin, end) of `s`, whose literal spans are `lit` (cut to those bytes).
  void append(std::string_view s, const Spans& lit, size_t begin = 0,
              size_t end = std::string_view::npos);
  void append(const Text& t) { append(t.str, t.literal); }
  // Bytes [begin, end) are literal too, or bytes of `piece` (appends mark at the end: Text is
  // built front to back).
  void mark(size_t begin, size_t end, uint32_t piece = 0);
  bool any_literal() const { return !literal.empty(); }
};

// Whether byte i is in one of the spans (binary search).
bool in_spans(const Spans& spans, size_t i);
// Spans [0, size) when `any`, else none.
Spans all_or_none(size_t size, bool any);
// The spans of a string made from strings with spans `from` by an operation that cannot trace its
// bytes: [0, size) literal when any of them was, kBrokenPiece when any held a piece.
Spans whole_like(size_t size, std::initializer_list<const Spans*> from);
// The span of `spans` holding byte i, or null.
const Span* span_at(const Spans& spans, size_t i);
bool has_pieces(const Spans& spans);

// Rendered text cut at its pieces: runs of text (with their literal spans) and pieces, in order.
// An error names a piece that the template changed rather than printed (value.h, kPieceText).
struct TextOrPiece {
  Text text;
  uint32_t piece = 0;  // > 0: a piece, and text is empty
};
Result<std::vector<TextOrPiece>> pieces_of(const Text& t);

// The literal bytes of a caller's string (from_json): all of it, or all but some bytes the caller
// wrote itself.
using LiteralSpans = std::function<Spans(std::string_view)>;

// The arguments of a call: positional, then keyword in call order.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

using Function = std::function<Result<Value>(CallArgs& args)>;

struct Undefined {
  std::string name;  // what was looked up, for error messages
};
struct None {};
using Array = std::vector<Value>;
struct Object;
struct Callable {
  std::string name;
  Function fn;
  bool is_macro = false;  // errors inside a macro already carry their position
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, Array, Object, Callable };

  Value() : v_(Undefined{}) {}
  static Value undefined(std::string name = {}) { return Value(Undefined{std::move(name)}); }
  static Value none() { return Value(None{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value number(double d) { return Value(d); }
  static Value string(std::string s) { return Value(std::move(s)); }
  static Value text(Text t);                   // a string with its literal spans
  static Value literal_string(std::string s);  // every byte literal
  static Value array(Array a = {});
  static Value tuple(Array a);  // a list that prints as (a, b), as dict.items() pairs do
  static Value object(Object o);
  static Value callable(std::string name, Function fn, bool is_macro = false);

  Kind kind() const { return Kind(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_array() const { return kind() == Kind::Array; }
  bool is_object() const { return kind() == Kind::Object; }
  bool is_callable() const { return kind() == Kind::Callable; }
  bool is_tuple() const { return tuple_; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return is_bool() ? int64_t(as_bool()) : std::get<int64_t>(v_); }
  double as_double() const { return is_float() ? std::get<double>(v_) : double(as_int()); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  // A string's literal spans (none for a template's own string or any other kind).
  const Spans& literal() const;
  bool any_literal() const { return lit_ != nullptr; }
  const std::string& undefined_name() const { return std::get<Undefined>(v_).name; }
  Array& array_ref() const { return *std::get<std::shared_ptr<Array>>(v_); }
  Object& object_ref() const { return *std::get<std::shared_ptr<Object>>(v_); }
  const Callable& callable_ref() const { return *std::get<std::shared_ptr<Callable>>(v_); }

  // Python's bool(): false for undefined, none, false, 0, 0.0, "", [] and {}.
  bool truthy() const;
  // Python's type name ("str", "int", "list", "dict", "NoneType", ...), for error messages.
  const char* type_name() const;

 private:
  using Storage =
      std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<Array>,
                   std::shared_ptr<Object>, std::shared_ptr<Callable>>;
  explicit Value(Storage v) : v_(std::move(v)) {}
  Storage v_;
  bool tuple_ = false;
  std::shared_ptr<const Spans> lit_;  // null: no literal byte
};

// A dict (keys in insertion order; lookups are linear, template dicts are small) or a
// namespace(), the one object a template may assign attributes to.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  bool literal_keys = false;  // every key is literal text (a caller's dict, or a key computed
                              // from literal text)

  Value key(const std::string& k) const;  // a key as a string value, literal or not

  const Value* find(std::string_view key) const;
  void set(std::string_view key, Value v);
};

// Python's str(): strings as they are, undefined as "", none as "None", True/False, floats as
// repr, lists and dicts as their repr. Fails on structures nested deeper than 512 or printing
// to more than 16 MiB (lists can share sublists, so a small value can print huge).
Result<std::string> to_str(const Value& v);
// Python's repr(): strings quoted ('a', "it's") with escapes.
Result<std::string> to_repr(const Value& v);
// str() and repr() with literal spans: the bytes that print a literal byte (or a literal key) are
// literal; quotes, brackets and separators are not.
Result<Text> to_text(const Value& v);
Result<Text> to_repr_text(const Value& v);

// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...), as
// transformers' tojson filter calls it: indent < 0 means none, and then the separators are
// ", " and ": "; with an indent they are "," and ": " and each item goes on its own line.
struct JsonStyle {
  int indent = -1;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
Result<std::string> to_json(const Value& v, const JsonStyle& style);
Result<Text> to_json_text(const Value& v, const JsonStyle& style);  // the escape of a literal
                                                                    // byte is literal

// Python's float repr: the shortest text that reads back to d ("0.1", "1e-05", "1e+20", "2.0").
std::string python_float_repr(double d);

// Python's ==: numbers by value (1 == 1.0, True == 1), strings by content, lists and dicts
// element by element, undefined equals only undefined. Visits at most 2^20 values (then false).
bool equals(const Value& a, const Value& b);
// Python's ordering (<): numbers, strings (by code point), lists (lexicographic). -1, 0 or 1;
// an error names the two types when they do not compare.
Result<int> compare(const Value& a, const Value& b);

// Whether `target` can be reached from v through lists and dicts (a namespace must not come to
// contain itself: values are reference counted, and a cycle would never be freed).
bool reaches(const Value& v, const Object* target);

// A JSON document as a value (objects keep their order; integers stay integers). With `literal`,
// each string's literal spans are what it returns, and every key is literal.
Value from_json(const nlohmann::ordered_json& j, const LiteralSpans* literal = nullptr);

// A string value derived from `src`: `out` is bytes [at, at + out.size()) of it (strip, split, a
// slice: its spans are cut to them), else, when it is not, literal as a whole if any byte of src
// was.
Value substring_of(const Value& src, std::string out, size_t at);
// A string value as long as `src` whose bytes map one to one (ASCII case mapping): src's spans;
// else literal as a whole if any byte of src was.
Value same_shape(const Value& src, std::string out);
// The code points of a string value at `indices` (as utf8_decode counts them), in that order,
// with their spans: s[i] and s[a:b:c] (the caller applies Python's slice rules).
Value code_points(const Value& src, const std::vector<size_t>& indices);

// What iterating v yields, as Python does: a list's items, a dict's keys, a string's characters
// (with their literal spans); undefined is empty. nullopt: v is not iterable.
std::optional<Array> iteration_items(const Value& v);

// UTF-8 code points of a string (invalid bytes map to U+FFFD), and back.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);

}  // namespace kamera::jinja
