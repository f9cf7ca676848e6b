// Pieces through the Jinja interpreter (issue 45): an opaque piece the caller puts into a string
// (a chunk part of a message's content) comes back from the render as a span of its own wherever
// the template prints it, through every operation that copies its bytes, and pieces_of cuts the
// output at it; an operation that changes or loses its bytes makes pieces_of refuse the output.
// No byte value marks a piece: the caller's own text may spell kPieceText and stays text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jinja/jinja.h"

namespace kamera {
namespace {

using jinja::Text;

// The caller's string: "a", piece 1, "b", piece 2, and its own spelling of the piece's bytes.
Text content() {
  Text t;
  t.append("a", true);
  t.append_piece(1);
  t.append("b", true);
  t.append_piece(2);
  t.append(std::string(jinja::kPieceText), true);
  return t;
}

// The output cut into pieces, written as text with each piece as <N>; an error's message.
std::string cut(const std::string& src) {
  auto tmpl = jinja::Template::parse(src, "t");
  if (!tmpl.ok()) return "parse: " + tmpl.message();
  jinja::Object ctx;
  ctx.set("c", jinja::Value::text(content()));
  auto text = tmpl->render_text(ctx);
  if (!text.ok()) return "render: " + text.message();
  auto pieces = jinja::pieces_of(*text);
  if (!pieces.ok()) return "refused: " + pieces.message();
  std::string out;
  for (const jinja::TextOrPiece& p : *pieces)
    out += p.piece ? "<" + std::to_string(p.piece) + ">" : p.text.str;
  return out;
}

TEST(JinjaPieces, ComeBackWhereverTheTemplatePrintsThem) {
  const std::string own(jinja::kPieceText);  // the caller's text that spells a piece's bytes
  struct Row {
    std::string tmpl, want;
  };
  const std::vector<Row> rows = {
      {"[{{ c }}]", "[a<1>b<2>" + own + "]"},
      {"{{ c ~ c }}", "a<1>b<2>" + own + "a<1>b<2>" + own},
      {"{% set s %}<{{ c | trim }}>{% endset %}{{ s }}", "<a<1>b<2>" + own + ">"},
      {"{{ c.split('b') | join('-') }}", "a<1>-<2>" + own},
      {"{{ c | replace('a', 'A') }}", "A<1>b<2>" + own},
      {"{{ c[1:] }}", "<1>b<2>" + own},
      {"{{ c | list | join('') }}", "a<1>b<2>" + own},
      {"{{ c | tojson }}", "\"a<1>b<2>" + own + "\""},
      {"{{ [c] }}", "['a<1>b<2>" + own + "']"},
      {"{{ c | e }}", "a<1>b<2>" + own},
      {"{{ c[1:8] }}{{ c[1:8] }}", "<1><1>"},  // a piece printed twice in a row: two pieces
  };
  for (const Row& r : rows) EXPECT_EQ(cut(r.tmpl), r.want) << r.tmpl;
}

TEST(JinjaPieces, AnOperationThatChangesAPieceIsRefused) {
  for (const std::string src :
       {"{{ c | upper }}", "{{ c | reverse }}", "{{ c[:4] }}", "{{ c[2:] }}",
        "{{ c | tojson(ensure_ascii=true) }}", "{{ c | replace('u', 'U') }}", "{{ c | title }}"}) {
    const std::string got = cut(src);
    EXPECT_EQ(got.rfind("refused: ", 0), 0u) << src << " -> " << got;
    EXPECT_NE(got.find("changed a chunk part"), std::string::npos) << got;
  }
  // a key keeps no spans: refused where it is made
  EXPECT_NE(cut("{{ {c: 1} }}").find("render: "), std::string::npos);
}

}  // namespace
}  // namespace kamera
