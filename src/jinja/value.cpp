#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

namespace kamera::jinja {
namespace {

constexpr int kMaxDepth = 512;                      // nesting of lists/dicts printed
constexpr size_t kMaxText = size_t(16) << 20;       // text one str(), repr() or json may make
constexpr size_t kCompareBudget = size_t(1) << 20;  // nodes one == or < may visit

Error too_deep() {
  return make_error(ErrorCode::InvalidArgument, "value nested deeper than {} levels", kMaxDepth);
}
Error too_big() {
  return make_error(ErrorCode::InvalidArgument, "value prints to more than {} bytes", kMaxText);
}

// Appends `s` byte by byte as `escape` prints each byte (into buf, returning the length): the
// print of a literal byte (in `lit`) is literal.
template <class F>
void append_escaped(Text& out, const std::string& s, const Spans& lit, F escape) {
  char buf[8];
  size_t k = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    while (k < lit.size() && lit[k].end <= i) ++k;
    const Span* like = k < lit.size() && lit[k].begin <= i ? &lit[k] : nullptr;
    out.append(std::string_view(buf, escape(static_cast<unsigned char>(s[i]), buf)), like);
  }
}

void append_repr_string(Text& out, const std::string& s, const Spans& lit) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = (has_single && !has_double) ? '"' : '\'';
  out.append(std::string_view(&q, 1));
  append_escaped(out, s, lit, [q](unsigned char c, char* buf) -> size_t {
    if (c == '\\' || c == q) {
      buf[0] = '\\';
      buf[1] = char(c);
      return 2;
    }
    if (c == '\n' || c == '\r' || c == '\t') {
      buf[0] = '\\';
      buf[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
      return 2;
    }
    if (c < 0x20 || c == 0x7f) return size_t(std::snprintf(buf, 8, "\\x%02x", c));
    buf[0] = char(c);
    return 1;
  });
  out.append(std::string_view(&q, 1));
}

void append_json_string(Text& out, const std::string& s, const Spans& lit) {
  out.append("\"");
  append_escaped(out, s, lit, [](unsigned char c, char* buf) -> size_t {
    const char* esc = c == '"'    ? "\\\""
                      : c == '\\' ? "\\\\"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                      : c == '\b' ? "\\b"
                      : c == '\f' ? "\\f"
                                  : nullptr;
    if (esc) {
      buf[0] = esc[0];
      buf[1] = esc[1];
      return 2;
    }
    if (c < 0x20) return size_t(std::snprintf(buf, 8, "\\u%04x", c));
    buf[0] = char(c);
    return 1;
  });
  out.append("\"");
}

// A key of `o` as its literal spans say (all of it or none).
Spans key_spans(const Object& o, const std::string& k) {
  return all_or_none(k.size(), o.literal_keys);
}

Status append_repr(Text& out, const Value& v, int depth) {
  if (depth > kMaxDepth) return too_deep();
  if (out.str.size() > kMaxText) return too_big();
  if (v.is_string()) {
    append_repr_string(out, v.as_string(), v.literal());
    return Status::Ok();
  }
  if (v.is_array()) {
    const Array& a = v.array_ref();
    out.append(v.is_tuple() ? "(" : "[");
    for (size_t i = 0; i < a.size(); ++i) {
      if (i) out.append(", ");
      KAMERA_TRY(append_repr(out, a[i], depth + 1));
    }
    if (v.is_tuple() && a.size() == 1) out.append(",");
    out.append(v.is_tuple() ? ")" : "]");
    return Status::Ok();
  }
  if (v.is_object()) {
    out.append("{");
    bool first = true;
    const Object& o = v.object_ref();
    for (const auto& [k, e] : o.items) {
      if (!first) out.append(", ");
      first = false;
      append_repr_string(out, k, key_spans(o, k));
      out.append(": ");
      KAMERA_TRY(append_repr(out, e, depth + 1));
    }
    out.append("}");
    return Status::Ok();
  }
  KAMERA_ASSIGN_OR_RETURN(std::string s, to_str(v));
  out.append(s);
  return Status::Ok();
}

void json_newline(Text& out, const JsonStyle& st, int level) {
  out.append("\n");
  out.append(std::string(size_t(st.indent) * size_t(level), ' '));
}

Status append_json(Text& out, const Value& v, const JsonStyle& st, int depth) {
  if (depth > kMaxDepth) return too_deep();
  if (out.str.size() > kMaxText) return too_big();
  const bool pretty = st.indent >= 0;
  switch (v.kind()) {
    case Value::Kind::None:
      out.append("null");
      return Status::Ok();
    case Value::Kind::Bool:
      out.append(v.as_bool() ? "true" : "false");
      return Status::Ok();
    case Value::Kind::Int:
      out.append(std::to_string(v.as_int()));
      return Status::Ok();
    case Value::Kind::Float: {
      const double d = v.as_double();
      out.append(std::isnan(d)   ? "NaN"
                 : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                                 : python_float_repr(d));
      return Status::Ok();
    }
    case Value::Kind::String:
      append_json_string(out, v.as_string(), v.literal());
      return Status::Ok();
    case Value::Kind::Array: {
      const Array& a = v.array_ref();
      if (a.empty()) {
        out.append("[]");
        return Status::Ok();
      }
      out.append("[");
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out.append(st.item_sep);
        if (pretty) json_newline(out, st, depth + 1);
        KAMERA_TRY(append_json(out, a[i], st, depth + 1));
      }
      if (pretty) json_newline(out, st, depth);
      out.append("]");
      return Status::Ok();
    }
    case Value::Kind::Object: {
      const Object& o = v.object_ref();
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : o.items) items.push_back(&kv);
      if (st.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      if (items.empty()) {
        out.append("{}");
        return Status::Ok();
      }
      out.append("{");
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out.append(st.item_sep);
        if (pretty) json_newline(out, st, depth + 1);
        append_json_string(out, items[i]->first, key_spans(o, items[i]->first));
        out.append(st.key_sep);
        KAMERA_TRY(append_json(out, items[i]->second, st, depth + 1));
      }
      if (pretty) json_newline(out, st, depth);
      out.append("}");
      return Status::Ok();
    }
    case Value::Kind::Undefined:
    case Value::Kind::Callable:
      break;
  }
  return make_error(ErrorCode::InvalidArgument, "object of type '{}' is not JSON serializable",
                    v.is_undefined() ? "Undefined" : v.type_name());
}

// One code point of a string as utf8_decode reads it: bytes [at, at + size) (an invalid byte is
// one piece, read as U+FFFD).
struct Utf8Piece {
  size_t at = 0, size = 0;
  char32_t cp = 0;
};

std::vector<Utf8Piece> utf8_pieces(std::string_view s) {
  std::vector<Utf8Piece> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len > 0 && i + size_t(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const unsigned char d = s[i + size_t(k)];
      ok = (d & 0xc0) == 0x80;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (!ok) {
      out.push_back({i, 1, char32_t(0xfffd)});
      ++i;
      continue;
    }
    out.push_back({i, size_t(len), cp});
    i += size_t(len);
  }
  return out;
}

// Appends the code point of piece p of src: its own bytes with their spans when they are what
// utf8_encode writes for it, else that encoding, literal if any of the bytes was.
void append_piece(Text& out, const Value& src, const Utf8Piece& p) {
  const std::string& s = src.as_string();
  const std::string enc = utf8_encode(std::u32string(1, p.cp));
  if (s.compare(p.at, p.size, enc) == 0) {
    out.append(s, src.literal(), p.at, p.at + p.size);
    return;
  }
  Span like{0, 0, 0};
  bool any = false;
  for (size_t b = p.at; b < p.at + p.size; ++b) {
    const Span* sp = span_at(src.literal(), b);
    any = any || sp;
    if (sp && sp->piece) like.piece = kBrokenPiece;
  }
  out.append(enc, any ? &like : nullptr);
}

Value piece_value(const Value& src, const Utf8Piece& p) {
  Text t;
  append_piece(t, src, p);
  return Value::text(std::move(t));
}

}  // namespace

void Text::append(std::string_view s, bool is_literal) {
  const size_t at = str.size();
  str.append(s);
  if (is_literal) mark(at, str.size());
}

void Text::append(std::string_view s, const Span* like) {
  const size_t at = str.size();
  str.append(s);
  if (like) mark(at, str.size(), like->piece);
}

void Text::append_piece(uint32_t piece) {
  const size_t at = str.size();
  str.append(kPieceText);
  mark(at, str.size(), piece);
}

void Text::append(std::string_view s, const Spans& lit, size_t begin, size_t end) {
  end = std::min(end, s.size());
  if (begin >= end) return;
  const size_t base = str.size();
  str.append(s.substr(begin, end - begin));
  auto it = std::upper_bound(lit.begin(), lit.end(), begin,
                             [](size_t b, const Span& sp) { return b < sp.end; });
  for (; it != lit.end() && it->begin < end; ++it)
    mark(base + std::max(it->begin, begin) - begin, base + std::min(it->end, end) - begin,
         it->piece);
}

void Text::mark(size_t begin, size_t end, uint32_t piece) {
  if (begin >= end) return;
  // Joins the literal spans it touches; one that began before `begin` (not how appends mark)
  // would be joined with all after it: more literal, never less. A piece's bytes copied one by
  // one (escapes, code points) join up to a whole piece, never past one: a piece printed twice
  // in a row stays two pieces.
  auto joins = [&](const Span& b) {
    if (b.end < begin) return false;
    if (piece == 0 && b.piece == 0) return true;
    return b.end == begin && b.piece == piece && piece != kBrokenPiece &&
           end - b.begin <= kPieceText.size();
  };
  while (!literal.empty() && joins(literal.back())) {
    begin = std::min(begin, literal.back().begin);
    end = std::max(end, literal.back().end);
    literal.pop_back();
  }
  if (!literal.empty() && literal.back().end > begin) {  // over a piece: the piece is broken
    begin = std::min(begin, literal.back().begin);
    end = std::max(end, literal.back().end);
    literal.pop_back();
    piece = kBrokenPiece;
  }
  literal.push_back({begin, end, piece});
}

bool in_spans(const Spans& spans, size_t i) {
  auto it = std::upper_bound(spans.begin(), spans.end(), i,
                             [](size_t b, const Span& sp) { return b < sp.end; });
  return it != spans.end() && it->begin <= i;
}

Spans all_or_none(size_t size, bool any) {
  if (!any || size == 0) return {};
  return {Span{0, size}};
}

Spans whole_like(size_t size, std::initializer_list<const Spans*> from) {
  bool any = false, pieces = false;
  for (const Spans* s : from) {
    any = any || !s->empty();
    pieces = pieces || has_pieces(*s);
  }
  if (!any || size == 0) return {};
  return {Span{0, size, pieces ? kBrokenPiece : 0}};
}

const Span* span_at(const Spans& spans, size_t i) {
  auto it = std::upper_bound(spans.begin(), spans.end(), i,
                             [](size_t b, const Span& sp) { return b < sp.end; });
  return it != spans.end() && it->begin <= i ? &*it : nullptr;
}

bool has_pieces(const Spans& spans) {
  return std::any_of(spans.begin(), spans.end(), [](const Span& s) { return s.piece != 0; });
}

Result<std::vector<TextOrPiece>> pieces_of(const Text& t) {
  std::vector<TextOrPiece> out;
  size_t at = 0;
  auto text_to = [&](size_t end) {
    if (end <= at) return;
    if (out.empty() || out.back().piece) out.emplace_back();
    out.back().text.append(t.str, t.literal, at, end);
  };
  for (const Span& sp : t.literal) {
    if (sp.piece == 0) continue;
    if (sp.piece == kBrokenPiece ||
        std::string_view(t.str).substr(sp.begin, sp.end - sp.begin) != kPieceText)
      return make_error(ErrorCode::InvalidArgument,
                        "the chat template changed a chunk part of a message's content (an "
                        "image or a cached chunk) instead of printing it as it is: '{}'",
                        t.str.substr(sp.begin, std::min<size_t>(sp.end - sp.begin, 64)));
    text_to(sp.begin);
    out.push_back({{}, sp.piece});
    at = sp.end;
  }
  text_to(t.str.size());
  return out;
}

Value Value::text(Text t) {
  Value v(std::move(t.str));
  if (!t.literal.empty()) v.lit_ = std::make_shared<const Spans>(std::move(t.literal));
  return v;
}

Value Value::literal_string(std::string s) {
  const size_t n = s.size();
  return text(Text{std::move(s), all_or_none(n, true)});
}

const Spans& Value::literal() const {
  static const Spans none;
  return lit_ ? *lit_ : none;
}

Value Object::key(const std::string& k) const {
  return literal_keys ? Value::literal_string(k) : Value::string(k);
}

Value substring_of(const Value& src, std::string out, size_t at) {
  if (!src.any_literal()) return Value::string(std::move(out));
  const std::string& s = src.as_string();
  if (at <= s.size() && s.compare(at, out.size(), out) == 0) {
    Text t;
    t.append(s, src.literal(), at, at + out.size());
    return Value::text(std::move(t));
  }
  const size_t n = out.size();
  return Value::text(Text{std::move(out), whole_like(n, {&src.literal()})});
}

Value same_shape(const Value& src, std::string out) {
  if (!src.any_literal()) return Value::string(std::move(out));
  const size_t n = out.size();
  if (n != src.as_string().size())
    return Value::text(Text{std::move(out), whole_like(n, {&src.literal()})});
  return Value::text(Text{std::move(out), src.literal()});
}

Value code_points(const Value& src, const std::vector<size_t>& indices) {
  const std::vector<Utf8Piece> pieces = utf8_pieces(src.as_string());
  Text t;
  for (size_t i : indices)
    if (i < pieces.size()) append_piece(t, src, pieces[i]);
  return Value::text(std::move(t));
}

Value Value::array(Array a) {
  return Value(std::make_shared<Array>(std::move(a)));
}
Value Value::tuple(Array a) {
  Value v = array(std::move(a));
  v.tuple_ = true;
  return v;
}
Value Value::object(Object o) {
  return Value(std::make_shared<Object>(std::move(o)));
}
Value Value::callable(std::string name, Function fn, bool is_macro) {
  return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn), is_macro}));
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return as_bool();
    case Kind::Int:
      return as_int() != 0;
    case Kind::Float:
      return as_double() != 0.0;
    case Kind::String:
      return !as_string().empty();
    case Kind::Array:
      return !array_ref().empty();
    case Kind::Object:
      return !object_ref().items.empty();
    case Kind::Callable:
      return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined:
      return "undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::Array:
      return "list";
    case Kind::Object:
      return object_ref().is_namespace ? "Namespace" : "dict";
    case Kind::Callable:
      return "function";
  }
  return "?";
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string_view key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::string(key), std::move(v));
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, in scientific form: [-]D[.DDD]e(+|-)XX.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = !mant.empty() && mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {  // positional, as Python's repr chooses
    if (exp < 0) {
      out += "0.";
      out.append(size_t(-exp - 1), '0');
      out += digits;
    } else if (size_t(exp) + 1 >= digits.size()) {
      out += digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

Result<std::string> to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return std::string();
    case Value::Kind::None:
      return std::string("None");
    case Value::Kind::Bool:
      return std::string(v.as_bool() ? "True" : "False");
    case Value::Kind::Int:
      return std::to_string(v.as_int());
    case Value::Kind::Float:
      return python_float_repr(v.as_double());
    case Value::Kind::String:
      return v.as_string();
    case Value::Kind::Array:
    case Value::Kind::Object:
      return to_repr(v);
    case Value::Kind::Callable:
      return "<function " + v.callable_ref().name + ">";
  }
  return std::string();
}

Result<std::string> to_repr(const Value& v) {
  KAMERA_ASSIGN_OR_RETURN(Text t, to_repr_text(v));
  return std::move(t.str);
}

Result<std::string> to_json(const Value& v, const JsonStyle& style) {
  KAMERA_ASSIGN_OR_RETURN(Text t, to_json_text(v, style));
  return std::move(t.str);
}

Result<Text> to_text(const Value& v) {
  if (v.is_string()) return Text{v.as_string(), v.literal()};
  if (v.is_array() || v.is_object()) return to_repr_text(v);
  KAMERA_ASSIGN_OR_RETURN(std::string s, to_str(v));
  return Text{std::move(s), {}};
}

Result<Text> to_repr_text(const Value& v) {
  Text out;
  KAMERA_TRY(append_repr(out, v, 0));
  return out;
}

Result<Text> to_json_text(const Value& v, const JsonStyle& style) {
  Text out;
  KAMERA_TRY(append_json(out, v, style, 0));
  return out;
}

namespace {

// == with a bound on the nodes visited (shared sublists can make a small value a huge tree);
// past it the values compare unequal.
bool equals_within(const Value& a, const Value& b, size_t& budget) {
  if (budget == 0) return false;
  --budget;
  using K = Value::Kind;
  const bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
  if (an && bn) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None:
      return true;
    case K::String:
      return a.as_string() == b.as_string();
    case K::Array: {
      const Array &x = a.array_ref(), &y = b.array_ref();
      if (a.is_tuple() != b.is_tuple()) return false;
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals_within(x[i], y[i], budget)) return false;
      }
      return true;
    }
    case K::Object: {
      const Object &x = a.object_ref(), &y = b.object_ref();
      if (&x == &y) return true;
      if (x.is_namespace || y.is_namespace || x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equals_within(v, *w, budget)) return false;
      }
      return true;
    }
    case K::Callable:
      return &a.callable_ref() == &b.callable_ref();
    default:
      return false;
  }
}

Result<int> compare_within(const Value& a, const Value& b, size_t& budget) {
  if (budget == 0) {
    return make_error(ErrorCode::InvalidArgument, "comparison visited over {} values",
                      kCompareBudget);
  }
  --budget;
  const bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
  if (an && bn) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 bytes order as code points
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_array() && b.is_array()) {
    const Array &x = a.array_ref(), &y = b.array_ref();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals_within(x[i], y[i], budget)) continue;
      return compare_within(x[i], y[i], budget);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return make_error(ErrorCode::InvalidArgument,
                    "'<' not supported between instances of '{}' and '{}'", a.type_name(),
                    b.type_name());
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  size_t budget = kCompareBudget;
  return equals_within(a, b, budget);
}

Result<int> compare(const Value& a, const Value& b) {
  size_t budget = kCompareBudget;
  return compare_within(a, b, budget);
}

bool reaches(const Value& v, const Object* target) {
  std::vector<const Value*> todo = {&v};
  std::unordered_set<const void*> seen;
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    if (x->is_array()) {
      if (!seen.insert(&x->array_ref()).second) continue;
      for (const Value& e : x->array_ref()) todo.push_back(&e);
    } else if (x->is_object()) {
      if (&x->object_ref() == target) return true;
      if (!seen.insert(&x->object_ref()).second) continue;
      for (const auto& kv : x->object_ref().items) todo.push_back(&kv.second);
    }
  }
  return false;
}

Value from_json(const nlohmann::ordered_json& j, const LiteralSpans* literal) {
  using J = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case J::null:
      return Value::none();
    case J::boolean:
      return Value::boolean(j.get<bool>());
    case J::number_integer:
      return Value::integer(j.get<int64_t>());
    case J::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u > uint64_t(INT64_MAX) ? Value::number(double(u)) : Value::integer(int64_t(u));
    }
    case J::number_float:
      return Value::number(j.get<double>());
    case J::string: {
      const std::string& s = j.get_ref<const std::string&>();
      return literal ? Value::text(Text{s, (*literal)(s)}) : Value::string(s);
    }
    case J::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(from_json(e, literal));
      return Value::array(std::move(a));
    }
    case J::object: {
      Object o;
      o.literal_keys = literal != nullptr;
      for (const auto& [k, e] : j.items()) o.items.emplace_back(k, from_json(e, literal));
      return Value::object(std::move(o));
    }
    default:
      return Value::none();  // binary and discarded: not produced by parsing JSON text
  }
}

std::optional<Array> iteration_items(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return Array{};
    case Value::Kind::Array:
      return v.array_ref();
    case Value::Kind::Object: {
      Array keys;
      const Object& o = v.object_ref();
      for (const auto& kv : o.items) keys.push_back(o.key(kv.first));
      return keys;
    }
    case Value::Kind::String: {
      Array chars;
      for (const Utf8Piece& p : utf8_pieces(v.as_string())) chars.push_back(piece_value(v, p));
      return chars;
    }
    default:
      return std::nullopt;
  }
}

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (const Utf8Piece& p : utf8_pieces(s)) out += p.cp;
  return out;
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xc0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += char(0xe0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    } else {
      out += char(0xf0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3f));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

}  // namespace kamera::jinja
