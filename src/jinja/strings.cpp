#include "jinja/strings.h"

#include <algorithm>
#include <cstdio>

#include "jinja/value.h"

namespace kamera::jinja {
namespace {

bool ascii_alpha(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
char32_t up(char32_t c) {
  return c >= 'a' && c <= 'z' ? c - 32 : c;
}
char32_t down(char32_t c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

}  // namespace

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

std::string python_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::u32string u = utf8_decode(s);
  const std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_python_space(c);
  };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip_it(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(u[e - 1])) --e;
  }
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> python_split(std::string_view s, const std::string* sep,
                                      int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos || sep->empty()) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  const std::u32string u = utf8_decode(s);
  size_t i = 0;
  while (true) {
    while (i < u.size() && is_python_space(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) {
      size_t e = u.size();
      while (e > i && is_python_space(u[e - 1])) --e;
      out.push_back(utf8_encode(std::u32string_view(u).substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < u.size() && !is_python_space(u[j])) ++j;
    out.push_back(utf8_encode(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> python_rsplit(std::string_view s, const std::string* sep,
                                       int64_t maxsplit) {
  if (maxsplit < 0) return python_split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (int64_t(out.size()) < maxsplit && !sep->empty()) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const std::u32string u = utf8_decode(s);
    size_t e = u.size();
    while (true) {
      while (e > 0 && is_python_space(u[e - 1])) --e;
      if (e == 0) break;
      if (int64_t(out.size()) >= maxsplit) {
        size_t b = 0;
        while (b < e && is_python_space(u[b])) ++b;
        out.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_python_space(u[b - 1])) --b;
      out.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
      e = b;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> python_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    if (s[i] == '\n' || s[i] == '\r') {
      size_t end = i + 1;
      if (s[i] == '\r' && end < s.size() && s[end] == '\n') ++end;
      out.emplace_back(s.substr(start, (keepends ? end : i) - start));
      start = i = end;
    } else {
      ++i;
    }
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string python_replace(std::string_view s, std::string_view from, std::string_view to,
                           int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    const std::u32string u = utf8_decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < u.size()) out += utf8_encode(std::u32string(1, u[i]));
    }
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(from, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += to;
    start = at + from.size();
    ++n;
  }
  out += s.substr(start);
  return out;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(up(char32_t(static_cast<unsigned char>(c))));
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(down(char32_t(static_cast<unsigned char>(c))));
  return out;
}

std::string python_capitalize(std::string_view s) {
  std::u32string u = utf8_decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? up(u[i]) : down(u[i]);
  return utf8_encode(u);
}

std::string python_title(std::string_view s) {
  std::u32string u = utf8_decode(s);
  bool prev_letter = false;
  for (char32_t& c : u) {
    const bool letter = ascii_alpha(c);
    c = letter ? (prev_letter ? down(c) : up(c)) : c;
    prev_letter = letter;
  }
  return utf8_encode(u);
}

std::string jinja_title(std::string_view s) {
  std::u32string u = utf8_decode(s);
  bool word_start = true;
  for (char32_t& c : u) {
    const bool sep = is_python_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      word_start = true;
      continue;
    }
    c = word_start ? up(c) : down(c);
    word_start = false;
  }
  return utf8_encode(u);
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string ascii_escape(std::string_view json) {
  std::string out;
  for (char32_t c : utf8_decode(json)) {
    if (c < 0x80) {
      out += char(c);
      continue;
    }
    char buf[16];
    if (c >= 0x10000) {
      const char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xd800 + (v >> 10)),
                    unsigned(0xdc00 + (v & 0x3ff)));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
    }
    out += buf;
  }
  return out;
}

}  // namespace kamera::jinja
