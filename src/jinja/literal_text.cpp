#include "jinja/literal_text.h"

#include <string_view>
#include <vector>

#include "jinja/strings.h"

namespace kamera::jinja {

Value strip_value(const Value& s, const std::string* chars, bool left, bool right) {
  std::string out = python_strip(s.as_string(), chars, left, right);
  if (!s.any_literal()) return Value::string(std::move(out));
  const size_t at =
      left ? s.as_string().size() - python_strip(s.as_string(), chars, true, false).size() : 0;
  return substring_of(s, std::move(out), at);
}

Value split_value(const Value& s, const std::string* sep, int64_t maxsplit, bool right) {
  const std::string& str = s.as_string();
  std::vector<std::string> parts =
      right ? python_rsplit(str, sep, maxsplit) : python_split(str, sep, maxsplit);
  Array out;
  size_t at = 0;
  for (std::string& p : parts) {
    // With a separator the parts and separators tile s; on whitespace a part starts with a
    // non-space byte, so its first occurrence after the previous part is where it was cut from.
    const size_t here = sep ? at : str.find(p, at);
    at = (here == std::string::npos ? str.size() : here) + p.size() + (sep ? sep->size() : 0);
    out.push_back(substring_of(s, std::move(p), here));
  }
  return Value::array(std::move(out));
}

Value splitlines_value(const Value& s, bool keepends) {
  const std::string& str = s.as_string();
  Array out;
  size_t at = 0;
  for (std::string& p : python_splitlines(str, keepends)) {
    const size_t here = str.find(p, at);  // only line breaks lie between two lines
    at = (here == std::string::npos ? str.size() : here) + p.size();
    out.push_back(substring_of(s, std::move(p), here));
  }
  return Value::array(std::move(out));
}

Value replace_value(const Value& s, const std::string& from, const Value& to, int64_t count) {
  const std::string& str = s.as_string();
  if (from.empty()) {  // `to` around every character: traced as a whole
    std::string out = python_replace(str, from, to.as_string(), count);
    const size_t n = out.size();
    return Value::text(Text{std::move(out), whole_like(n, {&s.literal(), &to.literal()})});
  }
  Text t;
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t at = str.find(from, start);
    if (at == std::string::npos) break;
    t.append(str, s.literal(), start, at);
    t.append(to.as_string(), to.literal());
    start = at + from.size();
  }
  t.append(str, s.literal(), start);
  return Value::text(std::move(t));
}

Value html_escape_value(const Value& s) {
  const std::string& str = s.as_string();
  if (!s.any_literal()) return Value::string(html_escape(str));
  Text t;
  for (size_t i = 0; i < str.size(); ++i)
    t.append(html_escape(std::string_view(&str[i], 1)), span_at(s.literal(), i));
  return Value::text(std::move(t));
}

Value like_whole(const Value& s, std::string out) {
  if (!s.any_literal()) return Value::string(std::move(out));
  const size_t n = out.size();
  return Value::text(Text{std::move(out), whole_like(n, {&s.literal()})});
}

}  // namespace kamera::jinja
