// Jinja evaluator: walks a parsed template (jinja_ast.h) over a context of values and returns
// the rendered text.
//
// Scoping follows jinja2: `set` at the top level is visible everywhere after it; a for loop's body
// gets a fresh scope on every iteration (so a `set` inside does not leak out: use namespace());
// `if` makes no scope; a macro sees its arguments and the template's top level.
//
// Every render runs under RenderLimits: a step budget (each expression and statement evaluated
// is a step), a cap on the output and on any string or list built, and a cap on macro recursion.
// Going past one is an InvalidArgument error naming the limit; nothing can loop or grow forever.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

#include "core/status.h"
#include "jinja/ast.h"
#include "jinja/value.h"

namespace kamera::jinja {

struct RenderLimits {
  uint64_t max_steps = 2'000'000;              // expressions, statements, loop iterations
  size_t max_output_bytes = size_t(64) << 20;  // also the largest string or list built
  int max_call_depth = 64;                     // nested macro calls
};

// Renders `body` with `context` (messages, add_generation_prompt, ...) on top of the built-in
// globals: the text, with the spans of it that print literal bytes of the context's values
// (value.h). Errors name "<name>:LINE:COL" of the expression or statement that failed.
Result<Text> evaluate(const Body& body, const Object& context, std::string_view name,
                      const RenderLimits& limits, std::time_t now);

}  // namespace kamera::jinja
