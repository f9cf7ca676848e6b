// Python's string operations (strings.h) on string values, carrying their literal spans
// (value.h): every byte of a result that was copied from an input keeps that byte's standing,
// and bytes the operation cannot trace back are literal if any input byte was.
#pragma once

#include <cstdint>
#include <string>

#include "jinja/value.h"

namespace kamera::jinja {

// str.strip / lstrip / rstrip and the trim filter: a substring of s.
Value strip_value(const Value& s, const std::string* chars, bool left, bool right);
// str.split (right: rsplit) and str.splitlines: a list of substrings of s.
Value split_value(const Value& s, const std::string* sep, int64_t maxsplit, bool right);
Value splitlines_value(const Value& s, bool keepends);
// str.replace and the replace filter: the kept bytes of s and every copy of `to` keep theirs.
Value replace_value(const Value& s, const std::string& from, const Value& to, int64_t count);
// The escape filter: the entity of a literal byte is literal.
Value html_escape_value(const Value& s);
// The whole result literal when any byte of s was (ensure_ascii, a reversed string).
Value like_whole(const Value& s, std::string out);

}  // namespace kamera::jinja
