// Python's string algorithms as chat templates call them (str.strip, str.split, str.replace,
// str.title, ...), on UTF-8 text. Whitespace is Python's str.isspace() set; case mapping
// (upper, lower, title, capitalize) covers ASCII letters only and leaves others as they are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kamera::jinja {

// Python's whitespace: \t \n \v \f \r, \x1c-\x1f, space, \x85, \xa0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_python_space(char32_t c);

// str.strip/lstrip/rstrip: `chars` null strips whitespace, else any of its code points.
std::string python_strip(std::string_view s, const std::string* chars, bool left = true,
                         bool right = true);
// str.split(sep, maxsplit) (sep null: runs of whitespace) and str.rsplit.
std::vector<std::string> python_split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> python_rsplit(std::string_view s, const std::string* sep,
                                       int64_t maxsplit);
std::vector<std::string> python_splitlines(std::string_view s, bool keepends);
// str.replace(old, new, count) (count < 0: all).
std::string python_replace(std::string_view s, std::string_view from, std::string_view to,
                           int64_t count);
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
std::string python_capitalize(std::string_view s);  // first letter up, the rest down
std::string python_title(std::string_view s);       // str.title(): each letter run capitalized
std::string jinja_title(std::string_view s);        // the title filter: words split at spaces,
                                                    // '-', and opening brackets
std::string html_escape(std::string_view s);        // & < > " ' as entities
std::string ascii_escape(std::string_view json);    // non-ASCII as \uXXXX (json ensure_ascii)

}  // namespace kamera::jinja
