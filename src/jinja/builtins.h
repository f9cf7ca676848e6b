// Jinja's built-in library, as chat templates use it: filters (`x | trim`), tests
// (`x is defined`), methods of strings, lists and dicts (`s.startswith('a')`, `d.items()`), and
// global functions (range, namespace, dict, raise_exception, strftime_now).
//
// Each follows Python's jinja2 with transformers' settings; where a rule is Python's own (strip's
// whitespace, split's runs, str.title) it is Python's. Unknown names are errors, never guesses.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "jinja/value.h"

namespace kamera::jinja {

// Bounds on what one render may build, shared with the evaluator (see RenderLimits in jinja.h).
struct BuiltinLimits {
  size_t max_string_bytes = 0;  // largest string or list any builtin may make
};

bool is_filter(std::string_view name);
bool is_test(std::string_view name);

Result<Value> apply_filter(std::string_view name, const Value& input, CallArgs& args,
                           const BuiltinLimits& limits);
Result<bool> apply_test(std::string_view name, const Value& input, CallArgs& args);

// `receiver.name` as a bound method (a callable), or nullopt when the receiver's type has no
// method of that name (then the caller looks the name up as a key or reports it undefined).
std::optional<Value> method(const Value& receiver, std::string_view name,
                            const BuiltinLimits& limits);

// The globals every template sees. `now` is the time strftime_now formats.
Object make_globals(const BuiltinLimits& limits, std::time_t now);

// The safety net under every filter and method: a string built from a string input or argument
// that had literal bytes, when the builtin reported none of its own, is literal as a whole (a
// builtin that copies bytes traces them itself; one that does not must not launder them).
Value keep_literal(Value result, const Value& input, const CallArgs& args);

// The error raise_exception produces, recognized by the evaluator (it keeps the message as is).
inline constexpr std::string_view kRaisedPrefix = "template raised an exception: ";

}  // namespace kamera::jinja
