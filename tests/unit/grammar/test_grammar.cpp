// The grammar core: expressions compiled to rule automata, the checks of Grammar::finish, and
// the matcher's stacks (recursion, tail calls, the depth limit).
#include <gtest/gtest.h>

#include "grammar/expr.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "unit/grammar/grammar_util.h"

namespace kamera::grammar {
namespace {

using grammar_test::accepts;

Grammar one_rule(const Expr& e) {
  Grammar g;
  const int32_t r = g.declare("root");
  auto a = e.compile();
  EXPECT_TRUE(a.ok()) << a.message();
  EXPECT_TRUE(g.define(r, *a).ok());
  Status st = g.finish(r);
  EXPECT_TRUE(st.ok()) << st.message();
  return g;
}

TEST(Grammar, ExpressionsAcceptTheirLanguage) {
  const Grammar g =
      one_rule(Expr::seq({Expr::alt({Expr::lit("red"), Expr::lit("rose")}),
                          Expr::repeat(Expr::range('0', '9'), 1, 3), Expr::opt(Expr::lit("!"))}));
  for (const char* ok : {"red1", "rose123", "red07!", "rose9!"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"", "red", "ros1", "red1234", "rose1!!", "red!"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(Grammar, AlternativesSharingAPrefixAreDeterministic) {
  const Grammar g = one_rule(Expr::alt({Expr::lit("abc"), Expr::lit("abd"), Expr::lit("ab")}));
  Matcher m(g);
  std::vector<int32_t> cur = m.initial(), next;
  for (char c : std::string("ab")) {
    m.advance(cur, uint8_t(c), next);
    cur.swap(next);
  }
  ASSERT_EQ(cur.size(), 2u);  // one byte-ready stack for "abc" and "abd", and the empty stack
  EXPECT_EQ(cur[0], Matcher::kAccept);
}

TEST(Grammar, RecursionNestsAndTailCallsDoNotGrowTheStack) {
  Grammar g;
  const int32_t p = g.declare("parens"), r = g.declare("as");
  // parens ::= "(" parens* ")"; as ::= "a" as | "b"
  auto pa = Expr::seq({Expr::lit("("), Expr::star(Expr::call(p)), Expr::lit(")")}).compile();
  auto ra = Expr::alt({Expr::seq({Expr::lit("a"), Expr::call(r)}), Expr::lit("b")}).compile();
  ASSERT_TRUE(g.define(p, *pa).ok());
  ASSERT_TRUE(g.define(r, *ra).ok());
  const int32_t root = g.declare("root");
  ASSERT_TRUE(g.define(root, *Expr::alt({Expr::call(p), Expr::call(r)}).compile()).ok());
  ASSERT_TRUE(g.finish(root).ok());
  EXPECT_TRUE(accepts(g, "(()(()))"));
  EXPECT_FALSE(accepts(g, "(()"));
  EXPECT_FALSE(accepts(g, "())"));
  Matcher m(g);
  std::vector<int32_t> cur = m.initial(), next;
  int max_depth = 0;
  for (int i = 0; i < 1000; ++i) {
    m.advance(cur, 'a', next);
    ASSERT_FALSE(next.empty());
    cur.swap(next);
    for (int32_t n : cur) max_depth = std::max(max_depth, m.depth(n));
  }
  EXPECT_LE(max_depth, 2);  // right recursion returns straight to the caller's caller
  m.advance(cur, 'b', next);
  EXPECT_EQ(next, std::vector<int32_t>{Matcher::kAccept});
}

TEST(Grammar, StacksDeeperThanTheLimitAreDropped) {
  Grammar g;
  const int32_t p = g.declare("parens");
  ASSERT_TRUE(
      g.define(p, *Expr::seq({Expr::lit("("), Expr::opt(Expr::call(p)), Expr::lit(")")}).compile())
          .ok());
  ASSERT_TRUE(g.finish(p).ok());
  Matcher m(g, 8);
  std::vector<int32_t> cur = m.initial(), next;
  int opened = 0;
  for (; opened < 20; ++opened) {
    m.advance(cur, '(', next);
    if (next.empty()) break;
    cur.swap(next);
  }
  EXPECT_EQ(opened, 8);
}

TEST(Grammar, FinishRefusesLeftRecursionAndEmptyLoops) {
  {
    Grammar g;
    const int32_t a = g.declare("a");
    ASSERT_TRUE(
        g.define(a,
                 *Expr::alt({Expr::seq({Expr::call(a), Expr::lit("x")}), Expr::lit("y")}).compile())
            .ok());
    Status st = g.finish(a);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("left recursion"), std::string::npos) << st.message();
  }
  {
    Grammar g;
    const int32_t a = g.declare("a"), b = g.declare("b");
    ASSERT_TRUE(g.define(b, *Expr::opt(Expr::lit("x")).compile()).ok());
    ASSERT_TRUE(g.define(a, *Expr::star(Expr::call(b)).compile()).ok());
    EXPECT_FALSE(g.finish(a).ok());
  }
  {
    Grammar g;
    const int32_t a = g.declare("a");
    g.declare("never_defined");
    ASSERT_TRUE(g.define(a, *Expr::lit("x").compile()).ok());
    Status st = g.finish(a);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("never_defined"), std::string::npos) << st.message();
  }
}

TEST(Grammar, DeadEndsAreTrimmed) {
  // "a" followed by a rule that accepts nothing, or "b": after "a" nothing can complete, so
  // "a" must not even be a prefix.
  Grammar g;
  const int32_t empty = g.declare("empty"), root = g.declare("root");
  Automaton none;
  none.add_state(false);
  ASSERT_TRUE(g.define(empty, none).ok());
  ASSERT_TRUE(
      g.define(
           root,
           *Expr::alt({Expr::seq({Expr::lit("a"), Expr::call(empty)}), Expr::lit("b")}).compile())
          .ok());
  ASSERT_TRUE(g.finish(root).ok());
  EXPECT_FALSE(grammar_test::is_prefix(g, "a"));
  EXPECT_TRUE(accepts(g, "b"));
}

TEST(Grammar, BoundedRepetitionTooLargeIsAnError) {
  auto a = Expr::repeat(Expr::lit("abcdefgh"), 0, 100000).compile(1000);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.message().find("states"), std::string::npos);
}

}  // namespace
}  // namespace kamera::grammar
