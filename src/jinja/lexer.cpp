#include "jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "jinja/value.h"

namespace kamera::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string src, std::string_view name, const LexOptions& opt)
      : src_(std::move(src)), name_(name), opt_(opt) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run() {
    while (pos_ < src_.size()) KAMERA_TRY(step());
    push(Tok::Eof, src_.size());
    return std::move(out_);
  }

 private:
  template <class... Args>
  Error error_at(size_t at, fmt::format_string<Args...> f, Args&&... args) const {
    const auto [line, col] = position(at);
    return make_error(ErrorCode::InvalidArgument, "{}:{}:{}: {}", name_, line, col,
                      fmt::format(f, std::forward<Args>(args)...));
  }

  std::pair<int, int> position(size_t at) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const size_t line = size_t(it - line_starts_.begin());
    return {int(line), int(at - line_starts_[line - 1]) + 1};
  }

  Token& push(Tok kind, size_t at, std::string text = {}) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    std::tie(t.line, t.col) = position(at);
    out_.push_back(std::move(t));
    return out_.back();
  }

  bool starts_with(size_t at, std::string_view s) const {
    return src_.compare(at, s.size(), s) == 0;
  }

  // One piece: the text up to the next tag, then that tag.
  Status step() {
    const bool line_start = pos_ == 0 || src_[pos_ - 1] == '\n';
    size_t start = pos_;
    while (true) {
      start = src_.find('{', start);
      if (start == std::string::npos || start + 1 >= src_.size()) break;
      const char k = src_[start + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++start;
    }
    if (start == std::string::npos || start + 1 >= src_.size()) {
      push(Tok::Text, pos_, src_.substr(pos_));
      pos_ = src_.size();
      return Status::Ok();
    }
    const char kind = src_[start + 1];
    size_t inner = start + 2;
    std::string text = src_.substr(pos_, start - pos_);
    const char mod = inner < src_.size() ? src_[inner] : 0;
    if (mod == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
      ++inner;
    } else if (mod == '+' && kind != '{') {
      ++inner;
    } else if (opt_.lstrip_blocks && kind != '{') {
      const size_t nl = text.rfind('\n');
      const size_t lpos = nl == std::string::npos ? 0 : nl + 1;
      if ((lpos > 0 || line_start) && std::all_of(text.begin() + long(lpos), text.end(),
                                                  [](char c) { return c == ' ' || c == '\t'; })) {
        text.resize(lpos);
      }
    }
    if (!text.empty()) push(Tok::Text, pos_, std::move(text));
    if (kind == '#') return comment(start, inner);
    if (kind == '%' && raw_block(start, inner)) return Status::Ok();
    return tag(start, inner, kind == '%');
  }

  // Whitespace after a tag: all of it after '-', else the first newline after a block tag.
  void after_tag(char mod, bool block) {
    if (mod == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (mod != '+' && block && opt_.trim_blocks && pos_ < src_.size() &&
               src_[pos_] == '\n') {
      ++pos_;
    }
  }

  Status comment(size_t start, size_t inner) {
    const size_t end = src_.find("#}", inner);
    if (end == std::string::npos) return error_at(start, "comment '{{#' is never closed");
    const char mod = end > inner ? src_[end - 1] : 0;
    pos_ = end + 2;
    after_tag(mod, true);
    return Status::Ok();
  }

  // `{% raw %}...{% endraw %}` at `start`: the content becomes text. False if not a raw tag.
  bool raw_block(size_t start, size_t inner) {
    auto match_tag = [&](size_t at, std::string_view word, char* end_mod) -> size_t {
      while (at < src_.size() && is_space(src_[at])) ++at;
      if (!starts_with(at, word)) return std::string::npos;
      at += word.size();
      while (at < src_.size() && is_space(src_[at])) ++at;
      *end_mod = 0;
      if (at < src_.size() && (src_[at] == '-' || src_[at] == '+')) *end_mod = src_[at++];
      return starts_with(at, "%}") ? at + 2 : std::string::npos;
    };
    char mod = 0;
    const size_t body = match_tag(inner, "raw", &mod);
    if (body == std::string::npos) return false;
    pos_ = body;
    after_tag(mod, true);
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t p = at + 2;
      const bool strip = p < src_.size() && src_[p] == '-';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
      char end_mod = 0;
      const size_t after = match_tag(p, "endraw", &end_mod);
      if (after == std::string::npos) continue;
      std::string text = src_.substr(pos_, at - pos_);
      if (strip) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      if (!text.empty()) push(Tok::Text, pos_, std::move(text));
      pos_ = after;
      after_tag(end_mod, true);
      return true;
    }
    // No endraw: lex it as an ordinary tag, and the parser reports the unknown/unclosed block.
    pos_ = start;
    return false;
  }

  Status tag(size_t start, size_t inner, bool block) {
    push(block ? Tok::BlockBegin : Tok::VarBegin, start);
    pos_ = inner;
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) {
        return error_at(start, "tag '{}' is never closed", block ? "{%" : "{{");
      }
      if (depth == 0) {
        const std::string_view close = block ? "%}" : "}}";
        char mod = 0;
        size_t at = pos_;
        if ((src_[at] == '-' || (block && src_[at] == '+')) && starts_with(at + 1, close)) {
          mod = src_[at++];
        }
        if (starts_with(at, close)) {
          push(block ? Tok::BlockEnd : Tok::VarEnd, pos_);
          pos_ = at + 2;
          after_tag(mod, block);
          return Status::Ok();
        }
      }
      KAMERA_TRY(token(&depth));
    }
  }

  Status token(int* depth) {
    const size_t at = pos_;
    const char c = src_[at];
    if (is_name_start(c)) {
      size_t e = at;
      while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
      push(Tok::Name, at, src_.substr(at, e - at));
      pos_ = e;
      return Status::Ok();
    }
    if (is_digit(c)) return number();
    if (c == '\'' || c == '"') return string_literal();
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (starts_with(at, op)) {
        push(Tok::Op, at, std::string(op));
        pos_ += 2;
        return Status::Ok();
      }
    }
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) != std::string_view::npos) {
      if (c == '(' || c == '[' || c == '{') ++*depth;
      if ((c == ')' || c == ']' || c == '}') && *depth > 0) --*depth;
      push(Tok::Op, at, std::string(1, c));
      ++pos_;
      return Status::Ok();
    }
    return error_at(at, "unexpected character '{}' in a tag", c);
  }

  Status number() {
    const size_t at = pos_;
    size_t e = at;
    while (e < src_.size() && is_digit(src_[e])) ++e;
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      is_float = true;
      ++e;
      while (e < src_.size() && is_digit(src_[e])) ++e;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && is_digit(src_[x])) {
        is_float = true;
        e = x;
        while (e < src_.size() && is_digit(src_[e])) ++e;
      }
    }
    const std::string text = src_.substr(at, e - at);
    Token& t = push(is_float ? Tok::Float : Tok::Int, at, text);
    if (is_float) {
      t.fval = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.ival = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return error_at(at, "integer literal {} is out of range", text);
    }
    pos_ = e;
    return Status::Ok();
  }

  Status string_literal() {
    const size_t at = pos_;
    const char q = src_[at];
    std::string value;
    size_t i = at + 1;
    while (true) {
      if (i >= src_.size()) return error_at(at, "string literal is never closed");
      const char c = src_[i];
      if (c == q) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        value += c;
        ++i;
        continue;
      }
      i = unescape(i, &value);
    }
    push(Tok::String, at, std::move(value));
    pos_ = i + 1;
    return Status::Ok();
  }

  // Python's escapes at src_[i] == '\\'; returns the index after the escape.
  size_t unescape(size_t i, std::string* out) const {
    const char e = src_[i + 1];
    static constexpr std::string_view kFrom = "nrtbfva\\'\"\n";
    static constexpr std::string_view kTo = "\n\r\t\b\f\v\a\\'\"";
    if (const size_t k = kFrom.find(e); k != std::string_view::npos) {
      if (e != '\n') *out += kTo[k];  // backslash-newline continues the line
      return i + 2;
    }
    if (e >= '0' && e <= '7') {
      char32_t cp = 0;
      size_t j = i + 1;
      for (int n = 0; n < 3 && j < src_.size() && src_[j] >= '0' && src_[j] <= '7'; ++n, ++j) {
        cp = cp * 8 + char32_t(src_[j] - '0');
      }
      *out += utf8_encode(std::u32string(1, cp));
      return j;
    }
    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits > 0 && i + 2 + size_t(digits) <= src_.size()) {
      char32_t cp = 0;
      bool ok = true;
      for (int n = 0; n < digits; ++n) {
        const int h = hex_value(src_[i + 2 + size_t(n)]);
        ok = ok && h >= 0;
        cp = cp * 16 + char32_t(std::max(h, 0));
      }
      if (ok && cp <= 0x10ffff) {
        *out += utf8_encode(std::u32string(1, cp));
        return i + 2 + size_t(digits);
      }
    }
    *out += '\\';  // unknown escapes stay as written, as in Python
    return i + 1;
  }

  std::string src_;
  std::string name_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<Token>> lex(std::string_view source, std::string_view name,
                               const LexOptions& options) {
  std::string src = normalize_newlines(source);
  if (!options.keep_trailing_newline && !src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src), name, options).run();
}

}  // namespace kamera::jinja
