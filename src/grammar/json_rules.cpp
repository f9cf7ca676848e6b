#include "grammar/json_rules.h"

namespace kamera::grammar {

namespace {

Expr set_of(std::string_view chars) {
  ByteSet s;
  for (char c : chars) s.set(uint8_t(c));
  return Expr::bytes(s);
}

Expr hex() {
  return set_of("0123456789abcdefABCDEF");
}

Expr cont() {
  return Expr::range(0x80, 0xBF);
}

// \uXXXX: any code unit but a surrogate, or a high surrogate followed by \u and a low one.
Expr unicode_escape() {
  Expr plain = Expr::alt({
      Expr::seq({set_of("0123456789abcABC"), hex(), hex(), hex()}),
      Expr::seq({set_of("efEF"), hex(), hex(), hex()}),
      Expr::seq({set_of("dD"), Expr::range('0', '7'), hex(), hex()}),
  });
  Expr pair = Expr::seq({set_of("dD"), set_of("89abAB"), hex(), hex(), Expr::lit("\\u"),
                         set_of("dD"), set_of("cdefCDEF"), hex(), hex()});
  return Expr::seq({Expr::lit("u"), Expr::alt({plain, pair})});
}

// Well-formed UTF-8 of two to four bytes (RFC 3629's table: no overlong forms, no surrogates).
Expr utf8_multibyte() {
  return Expr::alt({
      Expr::seq({Expr::range(0xC2, 0xDF), cont()}),
      Expr::seq({Expr::range(0xE0, 0xE0), Expr::range(0xA0, 0xBF), cont()}),
      Expr::seq({Expr::range(0xE1, 0xEC), cont(), cont()}),
      Expr::seq({Expr::range(0xED, 0xED), Expr::range(0x80, 0x9F), cont()}),
      Expr::seq({Expr::range(0xEE, 0xEF), cont(), cont()}),
      Expr::seq({Expr::range(0xF0, 0xF0), Expr::range(0x90, 0xBF), cont(), cont()}),
      Expr::seq({Expr::range(0xF1, 0xF3), cont(), cont(), cont()}),
      Expr::seq({Expr::range(0xF4, 0xF4), Expr::range(0x80, 0x8F), cont(), cont()}),
  });
}

}  // namespace

Expr JsonRules::ws() const {
  if (layout_ == Layout::Compact) return Expr::lit("");
  return Expr::opt(Expr::alt(
      {Expr::lit(" "), Expr::seq({Expr::lit("\n"), Expr::repeat(set_of(" \t"), 0, 20)})}));
}

Expr JsonRules::comma() const {
  if (layout_ == Layout::Compact) return Expr::lit(", ");
  return Expr::seq({ws(), Expr::lit(","), ws()});
}

Expr JsonRules::colon() const {
  if (layout_ == Layout::Compact) return Expr::lit(": ");
  return Expr::seq({ws(), Expr::lit(":"), ws()});
}

Expr JsonRules::string_char() {
  ByteSet ascii = byte_range(0x20, 0x7F);
  ascii.reset('"');
  ascii.reset('\\');
  Expr escape = Expr::seq({Expr::lit("\\"), Expr::alt({set_of("\"\\/bfnrt"), unicode_escape()})});
  return Expr::alt({Expr::bytes(ascii), escape, utf8_multibyte()});
}

Result<int32_t> JsonRules::rule(std::string name, const Expr& e) {
  auto a = e.compile(budget_);
  if (!a.ok()) return with_context(a.error(), name);
  const int32_t id = g_.declare(std::move(name));
  if (Status st = g_.define(id, *a); !st.ok()) return st.error();
  return id;
}

Result<int32_t> JsonRules::string(int min_len, int max_len) {
  if (min_len > kMaxLength || max_len > kMaxLength)
    return make_error(ErrorCode::Unsupported,
                      "string lengths above {} are not supported (minLength {}, maxLength {})",
                      kMaxLength, min_len, max_len);
  if (max_len >= 0 && max_len < min_len)
    return make_error(ErrorCode::InvalidArgument, "maxLength {} is below minLength {}", max_len,
                      min_len);
  const auto key = std::make_pair(min_len, max_len);
  if (auto it = strings_.find(key); it != strings_.end()) return it->second;
  Expr body = Expr::repeat(string_char(), min_len, max_len);
  const std::string name = max_len < 0 && min_len == 0
                               ? "string"
                               : "string{" + std::to_string(min_len) + "," +
                                     (max_len < 0 ? "" : std::to_string(max_len)) + "}";
  auto id = rule(name, Expr::seq({Expr::lit("\""), body, Expr::lit("\"")}));
  if (id.ok()) strings_[key] = *id;
  return id;
}

Result<int32_t> JsonRules::number(const NumberBounds& b) {
  std::string key = b.integer ? "integer" : "number";
  if (b.lo) key += (b.lo_exclusive ? " >" : " >=") + b.lo->text();
  if (b.hi) key += (b.hi_exclusive ? " <" : " <=") + b.hi->text();
  if (auto it = numbers_.find(key); it != numbers_.end()) return it->second;
  auto a = number_automaton(b);
  if (!a.ok()) return a.error();
  const int32_t id = g_.declare(key);
  if (Status st = g_.define(id, *a); !st.ok()) return st.error();
  numbers_[key] = id;
  return id;
}

// value, object and array call each other: declared first, defined after.
Status JsonRules::declare_values() {
  auto str = string();
  if (!str.ok()) return str.error();
  auto num = number(NumberBounds{});
  if (!num.ok()) return num.error();
  value_ = g_.declare("value");
  object_ = g_.declare("object");
  const int32_t array = g_.declare("array");
  const Expr sep = comma();
  const Expr value =
      Expr::alt({Expr::call(object_), Expr::call(array), Expr::call(*str), Expr::call(*num),
                 Expr::lit("true"), Expr::lit("false"), Expr::lit("null")});
  const Expr member = Expr::seq({Expr::call(*str), colon(), Expr::call(value_)});
  auto list = [&](const Expr& item, std::string_view close) {
    return Expr::alt({Expr::lit(close), Expr::seq({item, Expr::star(Expr::seq({sep, item})), ws(),
                                                   Expr::lit(close)})});
  };
  const Expr object = Expr::seq({Expr::lit("{"), ws(), list(member, "}")});
  const Expr arr = Expr::seq({Expr::lit("["), ws(), list(Expr::call(value_), "]")});
  for (auto [id, e] : {std::pair{value_, value}, {object_, object}, {array, arr}}) {
    auto a = e.compile(budget_);
    if (!a.ok()) return a.error();
    if (Status st = g_.define(id, *a); !st.ok()) return st;
  }
  return Status::Ok();
}

Result<int32_t> JsonRules::any_value() {
  if (value_ < 0)
    if (Status st = declare_values(); !st.ok()) return st.error();
  return value_;
}

Result<int32_t> JsonRules::any_object() {
  if (object_ < 0)
    if (Status st = declare_values(); !st.ok()) return st.error();
  return object_;
}

}  // namespace kamera::grammar
