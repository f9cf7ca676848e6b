// Literal spans through the Jinja interpreter (issue 46, finding 3): a caller's string rendered
// by a template is reported as literal wherever the template puts it and whatever it does with
// it (concatenation, slices, strip, split, replace, case mapping, escapes, tojson, repr, keys,
// set blocks, macros, namespaces), and the template's own text never is.
#include <gtest/gtest.h>

#include <string>

#include "jinja/builtins.h"
#include "jinja/chat_template.h"
#include "jinja/strings.h"

namespace kamera {
namespace {

using jinja::Spans;
using jinja::Text;

const std::string kClient = "<|im_end|>";  // what the caller's strings spell
const std::string kOwn = "<|im_start|>";   // what the template writes around each row

// Renders `row` between two copies of the template's own token, with `x` (a string) and `d` (a
// dict whose keys and values spell kClient) as the caller's literal values.
Result<Text> render_row(const std::string& row, bool literal = true) {
  KAMERA_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::parse(kOwn + row + kOwn, "row"));
  const jinja::LiteralSpans all = [](std::string_view s) {
    return jinja::all_or_none(s.size(), true);
  };
  const jinja::LiteralSpans* lit = literal ? &all : nullptr;
  jinja::Object ctx;
  ctx.set("x", jinja::from_json(nlohmann::ordered_json("a " + kClient + "\nb"), lit));
  ctx.set("d", jinja::from_json(nlohmann::ordered_json::parse(R"({"<|im_end|>": "<|im_end|>",
                                                                  "k": ["<|im_end|>"]})"),
                                lit));
  return t.render_text(ctx);
}

bool all_literal(const Spans& spans, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i)
    if (!jinja::in_spans(spans, i)) return false;
  return true;
}

bool none_literal(const Spans& spans, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i)
    if (jinja::in_spans(spans, i)) return false;
  return true;
}

struct Row {
  std::string tmpl;
  std::string needle = kClient;  // how the caller's spelling prints (compared ignoring case)
  // The template rebuilt the spelling from the caller's bytes and its own: some of it is
  // literal (a control token is read only inside the template's text, so none is).
  bool mixed = false;
};

TEST(LiteralSpans, EveryOperationKeepsTheCallersBytesLiteral) {
  const std::vector<Row> rows = {
      {"{{ x }}"},
      {"{{ x | trim }}{{ x.strip() }}{{ x.lstrip('a ') }}{{ x.rstrip('b') }}"},
      {"{{ x | tojson }}"},
      {"{{ x | tojson(indent=2) }}{{ x | tojson(ensure_ascii=true) }}"},
      {"{{ {'k': x} | tojson }}{{ [x, 1] | tojson }}"},
      {"{{ {x: 1} | tojson }}"},  // a key computed from the caller's text
      {"{{ d | tojson }}{{ d | tojson(sort_keys=true, indent=1) }}"},
      {"{{ d | string }}{{ [x] }}{{ d | items | list }}"},
      {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"},
      {"{% for k in d %}{{ k }}{% endfor %}{{ d.keys() | list | join(',') }}"},
      {"{{ d | dictsort | first | first }}"},
      {"{{ x | upper }}{{ x.upper() }}{{ x | lower }}{{ x.lower() }}"},
      {"{{ x | title }}{{ x.title() }}{{ x | capitalize }}{{ x.capitalize() }}"},
      {"{{ x | e }}{{ x | escape }}", "&lt;|im_end|&gt;"},
      {"{{ x | replace('a', 'A') }}{{ x.replace('\\n', '" + kOwn + "') }}"},
      {"{{ x | replace('b', '" + kOwn + "') }}{{ x.replace('', '') }}"},
      {"{{ x.split('\\n')[0] }}{{ x.split() | join('/') }}{{ x.rsplit(' ', 1)[-1] }}"},
      {"{{ x.split('|') | join('|') }}", kClient, true},
      {"{{ x.splitlines() | first }}{{ x.splitlines(true) | join }}"},
      {"{{ x[2:] }}{{ x[:-1] }}{{ x[::1] }}{{ x[::-1][::-1] }}{{ x[2] ~ x[3:] }}"},
      {"{{ x | reverse | reverse }}{{ x | list | join('') }}"},
      {"{% for c in x %}{{ c }}{% endfor %}"},
      {"{{ x ~ '" + kOwn + "' ~ x }}{{ '" + kOwn + "' + x + x }}{{ x * 2 }}"},
      {"{% set y %}[{{ x }}]{% endset %}{{ y }}"},
      {"{% macro m(v) %}({{ v }}){% endmacro %}{{ m(x) }}"},
      {"{% set ns = namespace(v=x) %}{{ ns.v }}{{ dict(v=x) | tojson }}"},
      {"{{ x | indent(2, true) }}{{ [x, x] | join(x) }}"},
      {"{{ '-'.join([x, x]) }}{{ x.join(['1', '2']) }}"},
      {"{{ [x] | map('trim') | join }}{{ [d] | map(attribute='k') | first | first }}"},
      {"{{ x | default('') }}{{ none | default(x) }}{{ x | string }}{{ x | safe }}"},
      {"{{ [x] | sort | first }}{{ [x] | unique | first }}{{ [x] | max }}"},
      {"{{ [x] | select | first }}{{ (x | trim)[0:] | tojson | trim }}"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.tmpl);
    auto r = render_row(row.tmpl);
    ASSERT_TRUE(r.ok()) << r.message();
    const std::string lower = jinja::ascii_lower(r->str);
    size_t found = 0;
    for (size_t at = lower.find(row.needle); at != std::string::npos;
         at = lower.find(row.needle, at + 1), ++found)
      EXPECT_TRUE(row.mixed ? !none_literal(r->literal, at, at + row.needle.size())
                            : all_literal(r->literal, at, at + row.needle.size()))
          << "byte " << at << " of: " << r->str;
    EXPECT_GT(found, 0u) << r->str;
    size_t own = 0;
    for (size_t at = r->str.find(kOwn); at != std::string::npos;
         at = r->str.find(kOwn, at + 1), ++own)
      EXPECT_TRUE(none_literal(r->literal, at, at + kOwn.size())) << "byte " << at;
    EXPECT_GE(own, 2u);
    // Without literal values the text is the same and nothing in it is literal.
    auto plain = render_row(row.tmpl, false);
    ASSERT_TRUE(plain.ok()) << plain.message();
    EXPECT_EQ(plain->str, r->str);
    EXPECT_TRUE(plain->literal.empty());
  }
}

// The quotes and punctuation tojson writes are the template's; each escape of a literal byte is
// literal, and the bytes a caller exempts (the server's markers) stay the template's.
TEST(LiteralSpans, TojsonMarksTheEscapesOfLiteralBytesOnly) {
  auto t = ChatTemplate::from_source("{{ messages[0].content | tojson }}");
  ASSERT_TRUE(t.ok()) << t.message();
  ChatRenderOptions o;
  o.literal = [](std::string_view s) {  // all but the "#...#" part
    const size_t a = s.find('#'), b = s.rfind('#');
    return Spans{{0, a}, {b + 1, s.size()}};
  };
  nlohmann::ordered_json msgs = nlohmann::ordered_json::parse(R"([{"role": "user",
                                                                   "content": "a\n#\u0002#b"}])");
  auto r = t->render_json_text(msgs, o);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->str, R"("a\n#\u0002#b")");
  const Spans want{{1, 4}, {12, 13}};  // a\n, then b; the quotes and #\u0002# are not
  ASSERT_EQ(r->literal.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r->literal[i].begin, want[i].begin);
    EXPECT_EQ(r->literal[i].end, want[i].end);
  }
}

// The net under every builtin: a string made from literal input that reports no literal byte of
// its own is literal as a whole.
TEST(LiteralSpans, ABuiltinThatLosesTheSpansMakesItsResultLiteral) {
  jinja::CallArgs none;
  const jinja::Value made = jinja::Value::string("built");
  EXPECT_EQ(jinja::keep_literal(made, jinja::Value::literal_string("in"), none).literal().size(),
            1u);
  EXPECT_FALSE(jinja::keep_literal(made, jinja::Value::string("in"), none).any_literal());
  jinja::CallArgs lit_arg;
  lit_arg.pos.push_back(jinja::Value::literal_string("arg"));
  EXPECT_TRUE(jinja::keep_literal(made, jinja::Value::string("in"), lit_arg).any_literal());
}

}  // namespace
}  // namespace kamera
