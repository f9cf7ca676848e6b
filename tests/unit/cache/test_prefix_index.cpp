// The prefix index (cache/prefix_index): the longest common token prefix of a query and the
// sequences it holds, served as copy-on-write forks of their pages, under a budget of the pages
// they hold (each once) that gives back tails, never an entry in use.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "cache/prefix_index.h"

using namespace kamera;

namespace {

constexpr int kPageTokens = 4;

class PrefixIndexTest : public testing::Test {
 protected:
  void SetUp() override {
    KvPool::Params p;
    p.layout.n_layers = 2;
    p.layout.channels = {{"k", 2, true}, {"v", 3, false}};
    p.page_tokens = kPageTokens;
    p.n_pages = 256;
    auto pool = KvPool::create(p);
    ASSERT_TRUE(pool.ok()) << pool.message();
    pool_ = std::move(*pool);
  }
  void TearDown() override {
    for (SeqId s : owned_) pool_->free_sequence(s);
    EXPECT_TRUE(pool_->check_invariants().ok());
  }

  // The row a "forward" of `token` at index i writes: distinct per (token, index, layer, channel).
  static float row_value(int32_t token, int i, int layer, int ch) {
    return float(token) * 1000.0f + float(i) + 0.25f * float(layer) + 0.125f * float(ch);
  }

  // A sequence holding `tokens` as if prefilled (rows from row_value, linear positions).
  SeqId computed(const std::vector<int32_t>& tokens) {
    const SeqId s = pool_->create_sequence();
    owned_.push_back(s);
    extend(s, tokens);
    return s;
  }
  // Prefills the tokens of `tokens` past those `s` holds behind them.
  void extend(SeqId s, const std::vector<int32_t>& tokens) {
    const int from = pool_->n_tokens(s);
    std::vector<Pos> pos;
    for (int i = from; i < int(tokens.size()); ++i) pos.push_back(Pos::linear(i));
    EXPECT_TRUE(pool_->append(s, pos).ok());
    for (int i = from; i < int(tokens.size()); ++i)
      for (int l = 0; l < 2; ++l)
        for (int c = 0; c < 2; ++c) {
          std::vector<float> row(c == 0 ? 2 : 3, row_value(tokens[i], i, l, c));
          pool_->write_row(s, l, c, i, row.data());
        }
  }

  // True when the first n tokens of `seq` carry the rows and positions of `tokens`.
  bool holds(SeqId seq, const std::vector<int32_t>& tokens, int n) {
    if (pool_->n_tokens(seq) != n) return false;
    float row[3];
    for (int i = 0; i < n; ++i) {
      if (pool_->positions(seq)[i].t != i) return false;
      for (int l = 0; l < 2; ++l)
        for (int c = 0; c < 2; ++c) {
          pool_->read_row(seq, l, c, i, row);
          if (row[0] != row_value(tokens[i], i, l, c)) return false;
        }
    }
    return true;
  }

  static std::vector<int32_t> random_tokens(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = int32_t(rng() % 500);
    return t;
  }

  std::unique_ptr<KvPool> pool_;
  std::vector<SeqId> owned_;
};

PrefixIndex::Params budget(int64_t tokens) {
  PrefixIndex::Params p;
  p.block_tokens = kPageTokens;
  p.token_budget = tokens;
  return p;
}

}  // namespace

TEST_F(PrefixIndexTest, FindsTheLongestMatchAndForksItsRows) {
  PrefixIndex index(*pool_, budget(1000));
  const auto a = random_tokens(40, 1);
  auto b = std::vector<int32_t>(a.begin(), a.begin() + 21);  // shares 21 tokens with a
  for (int32_t t : random_tokens(9, 2)) b.push_back(600 + t);
  const auto c = random_tokens(25, 3);
  auto ea = index.insert(computed(a), a), eb = index.insert(computed(b), b),
       ec = index.insert(computed(c), c);
  ASSERT_TRUE(ea.ok() && eb.ok() && ec.ok());
  ASSERT_GE(*ea, 0);
  ASSERT_GE(*eb, 0);
  ASSERT_GE(*ec, 0);

  // 33 tokens of a (mid-block: the match runs past the last full block), then a token no entry has.
  auto q = std::vector<int32_t>(a.begin(), a.begin() + 33);
  q.push_back(999);
  auto m = index.lookup(q);
  EXPECT_EQ(m.entry, *ea);
  EXPECT_EQ(m.n_tokens, 33);
  // b's first 27 tokens: b matches 27, a only 21.
  m = index.lookup(std::vector<int32_t>(b.begin(), b.begin() + 27));
  EXPECT_EQ(m.entry, *eb);
  EXPECT_EQ(m.n_tokens, 27);
  // The whole of c, and a query shorter than one block.
  EXPECT_EQ(index.lookup(c).n_tokens, 25);
  m = index.lookup(std::vector<int32_t>(c.begin(), c.begin() + 3));
  EXPECT_EQ(m.entry, *ec);
  EXPECT_EQ(m.n_tokens, 3);

  // The fork carries the entry's rows and positions for the matched tokens, sharing its pages.
  const int64_t cow_before = pool_->stats().cow_copies;
  auto fork = index.fork_prefix(*ea, 33);
  ASSERT_TRUE(fork.ok()) << fork.message();
  owned_.push_back(*fork);
  EXPECT_TRUE(holds(*fork, a, 33));
  EXPECT_EQ(pool_->stats().cow_copies, cow_before);
  EXPECT_FALSE(index.fork_prefix(*ea, 41).ok());
  EXPECT_FALSE(index.fork_prefix(12345, 1).ok());
}

TEST_F(PrefixIndexTest, ADifferingTokenStopsTheMatch) {
  PrefixIndex index(*pool_, budget(1000));
  const auto a = random_tokens(40, 4);
  ASSERT_TRUE(index.insert(computed(a), a).ok());
  for (int at : {0, 2, 9, 16, 39}) {  // in the first block, inside later blocks, on a boundary
    auto q = a;
    q[at] = 777;
    const auto m = index.lookup(q);
    EXPECT_EQ(m.n_tokens, at) << "differs at " << at;
    if (at == 0) {
      EXPECT_EQ(m.entry, -1);
    }
  }
  // A query longer than the entry matches the entry's length.
  auto longer = a;
  longer.push_back(5);
  EXPECT_EQ(index.lookup(longer).n_tokens, 40);
  EXPECT_EQ(index.lookup(std::vector<int32_t>{}).n_tokens, 0);
}

TEST_F(PrefixIndexTest, EvictionGivesBackTailsAndKeepsWhatIsInUse) {
  PrefixIndex index(*pool_, budget(100));
  const auto a = random_tokens(40, 5), b = random_tokens(40, 6), c = random_tokens(40, 7);
  auto ea = index.insert(computed(a), a);
  auto eb = index.insert(computed(b), b);
  ASSERT_TRUE(ea.ok() && eb.ok());
  ASSERT_TRUE(index.pin(*ea).ok());  // a is the least recently used, but in use
  auto ec = index.insert(computed(c), c);
  ASSERT_TRUE(ec.ok());
  ASSERT_GE(*ec, 0);
  EXPECT_LE(index.tokens_held(), 100);
  EXPECT_EQ(index.lookup(a).n_tokens, 40);  // whole: pinned
  // b and c gave back tails, a block at a time; each keeps its head, b (older) the shorter.
  const int kept_b = index.lookup(b).n_tokens, kept_c = index.lookup(c).n_tokens;
  EXPECT_GT(kept_b, 0);
  EXPECT_LT(kept_b, 40);
  EXPECT_LE(kept_b, kept_c);
  EXPECT_EQ(kept_b % kPageTokens, 0);
  EXPECT_EQ(40 + kept_b + kept_c, index.tokens_held());  // no page shared: each counted

  // Everything pinned: a new entry is given back whole, the budget holds.
  ASSERT_TRUE(index.pin(*eb).ok());
  ASSERT_TRUE(index.pin(*ec).ok());
  const auto d = random_tokens(40, 8);
  auto ed = index.insert(computed(d), d);
  ASSERT_TRUE(ed.ok());
  EXPECT_EQ(*ed, -1);
  EXPECT_LE(index.tokens_held(), 100);
  EXPECT_EQ(index.shrink_to(0), 40 + kept_b + kept_c);  // all pinned

  // A fork handed out outlives its entry: unpinned and evicted, its rows stay.
  auto fork = index.fork_prefix(*ea, 30);
  ASSERT_TRUE(fork.ok());
  owned_.push_back(*fork);
  for (auto e : {*ea, *eb, *ec}) index.unpin(e);
  EXPECT_EQ(index.shrink_to(0), 0);
  EXPECT_FALSE(index.contains(*ea));
  EXPECT_TRUE(holds(*fork, a, 30));
  EXPECT_EQ(index.stats().evictions, 4);  // d, then a, b and c
}

// Entries forked from one prompt share its pages: the budget counts them once.
TEST_F(PrefixIndexTest, SharedPagesCountOnce) {
  PrefixIndex index(*pool_, budget(60));
  const auto a = random_tokens(40, 11);
  auto ea = index.insert(computed(a), a);
  ASSERT_TRUE(ea.ok());
  ASSERT_GE(*ea, 0);
  auto b = std::vector<int32_t>(a.begin(), a.begin() + 32);  // a's first 8 pages, then 8 of its own
  for (int32_t t : random_tokens(8, 12)) b.push_back(600 + t);
  auto fork = index.fork_prefix(*ea, 32);
  ASSERT_TRUE(fork.ok());
  owned_.push_back(*fork);
  extend(*fork, b);
  auto eb = index.insert(*fork, b);
  ASSERT_TRUE(eb.ok());
  ASSERT_GE(*eb, 0);
  EXPECT_EQ(index.tokens_held(), 48);  // 10 pages of a, 2 of b's own: not 80 tokens
  EXPECT_EQ(index.lookup(a).n_tokens, 40);
  EXPECT_EQ(index.lookup(b).n_tokens, 40);
  auto fb = index.fork_prefix(*eb, 40);
  ASSERT_TRUE(fb.ok());
  owned_.push_back(*fb);
  EXPECT_TRUE(holds(*fb, b, 40));
  EXPECT_EQ(index.stats().evictions, 0);
}

// Tokens no lookup has used go before those a request was served, whatever their recency.
TEST_F(PrefixIndexTest, UnusedTailsGoBeforeServedOnes) {
  PrefixIndex index(*pool_, budget(100));
  const auto a = random_tokens(40, 13), b = random_tokens(40, 14), c = random_tokens(40, 15);
  ASSERT_TRUE(index.insert(computed(a), a).ok());
  EXPECT_EQ(index.lookup(a).n_tokens, 40);         // served: proven
  ASSERT_TRUE(index.insert(computed(b), b).ok());  // b is the more recent, but no lookup used it
  ASSERT_TRUE(index.insert(computed(c), c).ok());  // 120 tokens: b and c give back 20
  EXPECT_EQ(index.lookup(a).n_tokens, 40);
  EXPECT_LT(index.lookup(b).n_tokens + index.lookup(c).n_tokens, 80);
  EXPECT_LE(index.tokens_held(), 100);
}

// Conversations that come back in turn, whose prompts together exceed the budget: whole-entry LRU
// evicts each one just before it comes back (no hit at all); giving back tails keeps the head of
// each, about budget/working-set of every prompt. Every hit serves the rows it matched.
TEST_F(PrefixIndexTest, ConversationsTakingTurnsPastTheBudgetKeepTheirHeads) {
  constexpr int kConversations = 4, kTurns = 8, kFirst = 120, kTurn = 12;
  const int64_t working = kConversations * (kFirst + (kTurns - 1) * kTurn);
  PrefixIndex index(*pool_, budget(working * 3 / 4));
  std::vector<std::vector<int32_t>> conv(kConversations);
  int64_t prompt_tokens = 0, hit_tokens = 0;
  for (int t = 0; t < kTurns; ++t)
    for (int c = 0; c < kConversations; ++c) {
      std::vector<int32_t>& p = conv[size_t(c)];
      for (int32_t x : random_tokens(t == 0 ? kFirst : kTurn, uint32_t(100 * c + t)))
        p.push_back(x);
      const auto m = index.lookup(p);
      SeqId s = -1;
      if (m.entry >= 0) {
        auto f = index.fork_prefix(m.entry, m.n_tokens);
        ASSERT_TRUE(f.ok());
        s = *f;
        owned_.push_back(s);
        ASSERT_TRUE(holds(s, p, m.n_tokens)) << "conversation " << c << " turn " << t;
        extend(s, p);
      } else {
        s = computed(p);
      }
      if (t > 0) prompt_tokens += int64_t(p.size()), hit_tokens += m.n_tokens;
      ASSERT_TRUE(index.insert(s, p).ok());
      ASSERT_LE(index.tokens_held(), working * 3 / 4);
      pool_->free_sequence(s);  // the request ends; the entry holds its pages
      std::erase(owned_, s);
    }
  const double rate = double(hit_tokens) / double(prompt_tokens);
  EXPECT_GE(rate, 0.6) << hit_tokens << " of " << prompt_tokens << " prompt tokens from the cache";
}

TEST_F(PrefixIndexTest, AnExtensionReplacesItsPrefixAndBadInputChangesNothing) {
  PrefixIndex index(*pool_, budget(1000));
  const auto a = random_tokens(40, 9);
  const SeqId s = computed(a);
  auto first = index.insert(s, std::vector<int32_t>(a.begin(), a.begin() + 20));  // turn n
  ASSERT_TRUE(first.ok());
  auto second = index.insert(s, a);  // turn n + 1 extends it
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(index.contains(*first));
  EXPECT_EQ(index.tokens_held(), 40);
  // Tokens an entry already holds add nothing.
  auto again = index.insert(s, std::vector<int32_t>(a.begin(), a.begin() + 30));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, -1);
  EXPECT_EQ(index.stats().entries, 1);
  // More tokens than the sequence holds, or an unknown sequence: an error, nothing changed.
  auto longer = a;
  longer.push_back(1);
  EXPECT_EQ(index.insert(s, longer).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(index.insert(9999, a).code(), ErrorCode::NotFound);
  EXPECT_EQ(index.tokens_held(), 40);
  EXPECT_EQ(index.stats().entries, 1);
}

TEST_F(PrefixIndexTest, FreesItsPagesWhenDestroyed) {
  const int free_before = pool_->n_free_pages();
  {
    PrefixIndex index(*pool_, budget(1000));
    const auto a = random_tokens(40, 10);
    SeqId s = computed(a);
    ASSERT_TRUE(index.insert(s, a).ok());
    pool_->free_sequence(s);
    owned_.clear();
    EXPECT_LT(pool_->n_free_pages(), free_before);  // the entry holds the pages
  }
  EXPECT_EQ(pool_->n_free_pages(), free_before);
}

// An entry's approximate tail (rows a cold run would not compute: cache/prefix_index.h) is found
// only by an approximate lookup; an exact lookup stops at its exact part, and finds another
// entry's longer exact part even where the approximate entry matches deeper.
TEST_F(PrefixIndexTest, AnExactLookupNeverReturnsAnApproximateTail) {
  PrefixIndex index(*pool_, budget(1000));
  const auto a = random_tokens(40, 11);
  auto ea = index.insert(computed(a), a, 10);  // exact up to token 10 (mid-block), then a tail
  ASSERT_TRUE(ea.ok() && *ea >= 0);
  EXPECT_EQ(index.exact_tokens(*ea), 10);
  EXPECT_EQ(index.stats().tokens_approximate, 30);
  PrefixIndex::Match m = index.best_match(a);
  EXPECT_EQ(m.entry, *ea);
  EXPECT_EQ(m.n_tokens, 10);
  EXPECT_EQ(m.exact, 10);
  m = index.best_match(a, true);
  EXPECT_EQ(m.n_tokens, 40);
  EXPECT_EQ(m.exact, 10);
  // A cold run of a's first 22 tokens: the exact lookup finds its 22, though a matches 40 deeper.
  const std::vector<int32_t> head(a.begin(), a.begin() + 22);
  auto eh = index.insert(computed(head), head);
  ASSERT_TRUE(eh.ok() && *eh >= 0);
  EXPECT_TRUE(index.contains(*ea));  // not replaced: it holds more, if approximately
  m = index.lookup(a);
  EXPECT_EQ(m.entry, *eh);
  EXPECT_EQ(m.n_tokens, 22);
  m = index.lookup(a, true);  // the longest of either kind
  EXPECT_EQ(m.entry, *ea);
  EXPECT_EQ(m.n_tokens, 40);
  // Where both match as far, an approximate lookup takes the exact one.
  auto q = head;
  q.push_back(999);
  m = index.lookup(q, true);
  EXPECT_EQ(m.entry, *eh);
  EXPECT_EQ(m.exact, 22);
}

// An approximate entry never replaces an entry it extends that holds more of it exactly; an exact
// entry replaces an approximate one it extends; a tail cut keeps the exact part within the entry.
TEST_F(PrefixIndexTest, AnApproximateEntryReplacesOnlyWhatItHoldsAsExactly) {
  PrefixIndex index(*pool_, budget(1000));
  const auto a = random_tokens(40, 12);
  const SeqId s = computed(a);
  const std::vector<int32_t> turn(a.begin(), a.begin() + 24);
  auto cold = index.insert(s, turn);  // exact, 24 tokens
  ASSERT_TRUE(cold.ok() && *cold >= 0);
  auto approx = index.insert(s, a, 8);  // extends it, exact only up to 8
  ASSERT_TRUE(approx.ok() && *approx >= 0);
  EXPECT_TRUE(index.contains(*cold));
  EXPECT_EQ(index.best_match(a).n_tokens, 24);
  // The same tokens as approx, as exact as cold: they replace both.
  auto better = index.insert(s, a, 30);
  ASSERT_TRUE(better.ok() && *better >= 0);
  EXPECT_FALSE(index.contains(*cold));
  EXPECT_FALSE(index.contains(*approx));
  EXPECT_EQ(index.best_match(a).n_tokens, 30);
  // The same tokens, less exact: nothing added.
  auto worse = index.insert(s, a, 5);
  ASSERT_TRUE(worse.ok());
  EXPECT_EQ(*worse, -1);
  // Cut below its exact part: the exact part is cut with it.
  EXPECT_EQ(index.shrink_to(20), 20);
  EXPECT_EQ(index.exact_tokens(*better), 20);
  EXPECT_EQ(index.best_match(a).n_tokens, 20);
  EXPECT_EQ(index.stats().tokens_approximate, 0);
}
