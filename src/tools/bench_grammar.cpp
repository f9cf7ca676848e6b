#include "tools/bench_grammar.h"

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "eval/metrics.h"
#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "model/forward.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct PassStats {
  std::vector<double> forward_ms, constraint_ms;
  int documents = 0, parsed = 0;
  grammar::MaskCacheStats cache_before, cache_after;
  size_t escaped_walked = 0, reused = 0, masks = 0;
};

// Gumbel-max: a sample of softmax(logits / temperature) without sorting the vocabulary.
int32_t sample(std::span<const float> logits, float temperature, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(1e-12, 1.0);
  int32_t best = 0;
  double best_v = -INFINITY;
  for (size_t t = 0; t < logits.size(); ++t) {
    if (!std::isfinite(logits[t])) continue;
    const double v = logits[t] / std::max(temperature, 1e-3f) - std::log(-std::log(u(rng)));
    if (v > best_v) {
      best_v = v;
      best = int32_t(t);
    }
  }
  return best;
}

struct GrammarRun {
  const GrammarBenchArgs& a;
  const Model& m;
  Engine& engine;
  KvPool& pool;
  std::shared_ptr<const grammar::CompiledGrammar> cg;
  std::vector<int32_t> prompt;
  std::mt19937_64 rng;

  // A fresh sequence with the prompt in it; its last logits.
  Result<std::vector<float>> start(SeqId& seq) {
    if (seq >= 0) pool.free_sequence(seq);
    seq = pool.create_sequence();
    std::vector<Pos> pos(prompt.size());
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = Pos::linear(int32_t(i));
    return engine.forward(pool, seq, ForwardInput::from_tokens(prompt, pos));
  }

  Result<PassStats> pass() {
    PassStats s;
    s.cache_before = cg->stats();
    SeqId seq = -1;
    KAMERA_ASSIGN_OR_RETURN(std::vector<float> logits, start(seq));
    auto c = std::make_unique<grammar::GrammarConstraint>(cg);
    std::string text;
    int32_t next_pos = int32_t(prompt.size());
    for (int i = 0; i < a.tokens; ++i) {
      const double t0 = now_ms();
      c->mask(logits);
      const double t_mask = now_ms() - t0;
      const int32_t t = sample(logits, a.temperature, rng);  // not timed: the loop's own work
      const double t1 = now_ms();
      KAMERA_TRY(c->accept(t));
      s.constraint_ms.push_back(t_mask + now_ms() - t1);
      if (c->ended()) {  // a whole document: parse it, start the next
        s.documents++;
        s.parsed += nlohmann::json::accept(text);
        s.escaped_walked += c->stats().escaped_walked;
        s.reused += c->stats().reused;
        s.masks += c->stats().masks;
        c = std::make_unique<grammar::GrammarConstraint>(cg);
        text.clear();
        KAMERA_ASSIGN_OR_RETURN(logits, start(seq));
        next_pos = int32_t(prompt.size());
        continue;
      }
      text += cg->trie().bytes(t);
      const Pos p = Pos::linear(next_pos++);
      const double t2 = now_ms();
      KAMERA_ASSIGN_OR_RETURN(
          logits, engine.forward(pool, seq, ForwardInput::from_tokens({&t, 1}, {&p, 1})));
      s.forward_ms.push_back(now_ms() - t2);
    }
    s.escaped_walked += c->stats().escaped_walked;
    s.reused += c->stats().reused;
    s.masks += c->stats().masks;
    s.cache_after = cg->stats();
    pool.free_sequence(seq);
    return s;
  }
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

json pass_json(const PassStats& s) {
  const double fwd = mean(s.forward_ms), con = mean(s.constraint_ms);
  std::vector<double> sorted = s.constraint_ms;
  std::sort(sorted.begin(), sorted.end());
  const double p90 = sorted.empty() ? 0 : sorted[sorted.size() * 9 / 10];
  return json{{"tokens", s.constraint_ms.size()},
              {"documents", s.documents},
              {"documents_parsed", s.parsed},
              {"forward_ms_mean", fwd},
              {"forward_ms_median", median(s.forward_ms)},
              {"constraint_ms_mean", con},
              {"constraint_ms_median", median(s.constraint_ms)},
              {"constraint_ms_p90", p90},
              {"constraint_ms_max", sorted.empty() ? 0 : sorted.back()},
              {"constraint_share_of_forward", fwd > 0 ? con / fwd : 0},
              {"positions_filled", s.cache_after.positions - s.cache_before.positions},
              {"fill_ms", 1e3 * (s.cache_after.fill_seconds - s.cache_before.fill_seconds)},
              {"fill_ms_max", 1e3 * s.cache_after.fill_seconds_max},
              {"fill_steps", s.cache_after.steps - s.cache_before.steps},
              {"masks_computed", s.masks},
              {"masks_reused", s.reused},
              {"escaped_tokens_walked", s.escaped_walked}};
}

Result<std::shared_ptr<const grammar::Grammar>> load_grammar(const std::string& path) {
  if (path.empty()) return grammar::json_object_grammar();
  std::ifstream f(path);
  if (!f) return make_error(ErrorCode::NotFound, "cannot read schema file {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  auto schema = nlohmann::ordered_json::parse(ss.str(), nullptr, false);
  if (schema.is_discarded()) return make_error(ErrorCode::InvalidArgument, "{} is not JSON", path);
  return grammar::json_schema_grammar(schema);
}

void print_human(const json& j) {
  for (const char* pass : {"cold", "warm"}) {
    const json& p = j[pass];
    std::printf(
        "%s: %d tokens, %d documents (%d parse); forward %.2f ms/token, constraint %.3f ms/token "
        "(p90 %.3f, max %.2f) = %.1f%% of the forward; %d positions filled in %.1f ms\n",
        pass, p["tokens"].get<int>(), p["documents"].get<int>(), p["documents_parsed"].get<int>(),
        p["forward_ms_mean"].get<double>(), p["constraint_ms_mean"].get<double>(),
        p["constraint_ms_p90"].get<double>(), p["constraint_ms_max"].get<double>(),
        100 * p["constraint_share_of_forward"].get<double>(), p["positions_filled"].get<int>(),
        p["fill_ms"].get<double>());
  }
}

}  // namespace

int run_bench_grammar(const GrammarBenchArgs& a) {
  if (a.tokens < 1) return fail("--tokens must be >= 1", a.json);
  auto loaded = load_for_cli(a.model, "");
  if (!loaded.ok()) return fail(loaded.error(), a.json);
  const Model& m = **loaded;
  if (!m.tokenizer) return fail(a.model + " has no tokenizer", a.json);
  double t0 = now_ms();
  auto trie = grammar::TokenTrie::from_tokenizer(*m.tokenizer);
  const double trie_ms = now_ms() - t0;
  t0 = now_ms();
  auto g = load_grammar(a.schema);
  if (!g.ok()) return fail(g.error(), a.json);
  const double compile_ms = now_ms() - t0;
  std::vector<int32_t> prompt = m.tokenizer->encode("JSON:", m.tokenizer->add_bos());
  auto ctx = context_for(*loaded, a.threads, int64_t(prompt.size()) + a.tokens + 16);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  GrammarRun run{a,
                 m,
                 (*ctx)->engine(),
                 (*ctx)->pool(),
                 std::make_shared<const grammar::CompiledGrammar>(*g, trie),
                 prompt,
                 std::mt19937_64(a.seed)};
  json out{{"mode", "grammar"},
           {"model", model_summary(m)},
           {"system", system_info(&m)},
           {"threads", a.threads},
           {"schema", a.schema.empty() ? "json_object" : a.schema},
           {"vocab", m.tokenizer->n_vocab()},
           {"grammar_states", (*g)->n_states()},
           {"trie_ms", trie_ms},
           {"compile_ms", compile_ms},
           {"temperature", a.temperature}};
  for (const char* pass : {"cold", "warm"}) {
    auto s = run.pass();
    if (!s.ok()) return fail(s.error(), a.json);
    out[pass] = pass_json(*s);
  }
  if (a.json)
    print_json(out, 2);
  else
    print_human(out);
  return 0;
}

}  // namespace kamera::cli
