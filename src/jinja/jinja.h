// A small Jinja interpreter for the chat templates stored in GGUF files
// (`tokenizer.chat_template`), rendering as Hugging Face transformers does: jinja2 with
// trim_blocks and lstrip_blocks on, its tojson (ensure_ascii off, Python spacing), the
// loopcontrols extension, raise_exception and strftime_now.
//
// Supported subset (anything else is an error when the template is parsed, never a guess):
//   text, {{ expr }}, {# comments #}, {% raw %}, whitespace control {%- -%} {{- -}} {%+ +%}
//   {% if %}/{% elif %}/{% else %}/{% endif %}
//   {% for x in xs [if cond] %} ... [{% else %}] {% endfor %}, with `for k, v in d.items()`,
//     loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem/cycle(),
//     {% break %} and {% continue %}
//   {% set x = e %}, {% set a, b = e %}, {% set ns.attr = e %} (on a namespace()),
//     {% set x %}...{% endset %}
//   {% macro name(a, b=default) %}...{% endmacro %} and calls to it
//   {% generation %}...{% endgeneration %} (renders its body)
//   expressions: none/true/false (either case), numbers, strings (Python escapes), lists,
//     tuples, dicts; .attr, [item], [a:b:c] slices (negative steps too), calls with keyword
//     arguments; + - * / // % ** ~; == != < <= > >= (chained), in, not in; and, or, not;
//     `a if c else b`; `| filter(args)`; `is [not] test args`
//   filters: abs attr capitalize count d default dictsort e escape first float indent int items
//     join last length list lower map max min reject rejectattr replace reverse round safe
//     select selectattr sort string sum title tojson trim unique upper
//   tests: boolean callable defined divisibleby eq equalto even false filter float ge gt
//     greaterthan in integer iterable le lessthan lower lt mapping ne none number odd sameas
//     sequence string test true undefined upper (and == != < <= > >=)
//   str methods: strip lstrip rstrip split rsplit splitlines startswith endswith upper lower
//     title capitalize replace find rfind count join isdigit isspace isalpha isalnum islower
//     isupper; dict methods: items keys values get
//   globals: range, namespace, dict, raise_exception, strftime_now
//
// Not supported: include/import/extends/block/call/filter/with tags, recursive loops, `%`
// string formatting, str.format, *args/**kwargs, mutating list methods. Case mapping (upper,
// lower, title, capitalize) covers ASCII letters only.
//
// Semantics follow Python: undefined values print as "" and are falsy, but looking into one
// (`x.y`, `x + 1`) is an error; `{{ none }}` prints "None"; integers are 64-bit and overflow is
// an error. All errors are kamera Results with "<name>:LINE:COL: ..."; nothing throws.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "jinja/ast.h"
#include "jinja/eval.h"
#include "jinja/lexer.h"
#include "jinja/value.h"

namespace kamera::jinja {

class Template {
 public:
  // Parses `source`; `name` prefixes error positions ("chat template:3:14: ..."). A syntax
  // error is InvalidArgument, an unsupported tag, filter or test is Unsupported.
  static Result<Template> parse(std::string_view source, std::string name = "template",
                                const LexOptions& options = {});

  // Renders with `context` (name -> value) over the globals. `now` is what strftime_now formats.
  Result<std::string> render(const Object& context, const RenderLimits& limits = {},
                             std::time_t now = std::time(nullptr)) const;
  // The same with the spans of the text that print literal bytes of the context (value.h).
  Result<Text> render_text(const Object& context, const RenderLimits& limits = {},
                           std::time_t now = std::time(nullptr)) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace kamera::jinja
