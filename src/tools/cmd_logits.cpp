// kamera logits: f32 logits (weights dequantized, KV in f32) for cross-checks with other engines.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "model/forward.h"
#include "tools/cli_common.h"
#include "vision/rope_index.h"

namespace kamera::cli {

namespace {

struct LogitsArgs {
  std::string model, tokenizer, tokens, prompt;
  bool all = false, json = false;
  int threads = default_threads();
  int top = 5;
  VlArgs vl;
};

// Logits after a prompt with images or audio clips (--mmproj / --image / --audio): the last
// position's only.
int run_vl_logits(const LogitsArgs& a, const Model& m, std::shared_ptr<const Model> model) {
  if (!a.tokens.empty() || a.all)
    return fail(
        "--image / --audio take -p (with <image> / <audio> markers) and give the last position's "
        "logits; not --tokens or --all-positions",
        a.json);
  std::vector<const char*> kinds;
  auto pieces = vl_pieces(a.vl, m, a.prompt, a.threads, &kinds);
  if (!pieces.ok()) return fail(pieces.error(), a.json);
  int64_t rows = 0;
  std::vector<int32_t> ids;
  for (const ChunkContent& c : *pieces) {
    rows += c.n();
    ids.insert(ids.end(), c.tokens.begin(), c.tokens.end());
  }
  auto ctx = context_for(std::move(model), a.threads, rows);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  const SeqId seq = (*ctx)->pool().create_sequence();
  int32_t next = 0;
  auto logits =
      prefill_pieces((*ctx)->engine(), (*ctx)->pool(), seq, *pieces, 0, LogitsMode::Last, &next);
  if (!logits.ok()) return fail(logits.message(), a.json);
  const int V = m.cfg.n_vocab;
  if (a.json) {
    json pj = json::array();
    size_t media = 0;  // a picture's piece says image_rows, a clip's audio_rows
    for (const ChunkContent& c : *pieces)
      pj.push_back(c.is_tokens() ? json{{"tokens", c.tokens}}
                                 : json{{std::string(kinds.at(media++)) + "_rows", c.n()},
                                        {"extent", c.extent()}});
    print_json(json{{"model", model_summary(m)},
                    {"pieces", pj},
                    {"rows", rows},
                    {"next_position", next},
                    {"n_vocab", V},
                    {"all_positions", false},
                    {"logits", json::array({*logits})}});
    return 0;
  }
  const float* l = logits->data();
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  const int k = std::min(a.top, V);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int x, int y) { return l[x] > l[y]; });
  std::printf("after %lld rows (next position %d):", (long long)rows, next);
  for (int i = 0; i < k; ++i) std::printf("  %d %.6f", idx[i], l[idx[i]]);
  std::printf("\n");
  return 0;
}

int run_logits(const LogitsArgs& a) {
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.error(), a.json);
  const Model& m = **loaded;
  if (a.vl.active()) return run_vl_logits(a, m, *loaded);
  std::vector<int32_t> ids;
  if (!a.tokens.empty()) {
    auto parsed = parse_token_list(a.tokens);
    if (!parsed.ok()) return fail(parsed.message(), a.json);
    ids = *parsed;
  } else {
    if (!m.tokenizer)
      return fail(fmt::format("{} has no tokenizer: pass --tokens or -z", a.model), a.json);
    ids = m.tokenizer->encode(a.prompt, true);
  }
  for (int32_t t : ids)
    if (t < 0 || t >= m.cfg.n_vocab)
      return fail(fmt::format("token id {} is outside the vocabulary [0, {})", t, m.cfg.n_vocab),
                  a.json);
  auto ctx = context_for(*loaded, a.threads, int64_t(ids.size()));
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  Engine& engine = (*ctx)->engine();
  const SeqId seq = (*ctx)->pool().create_sequence();
  std::vector<Pos> pos(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) pos[i] = Pos::linear(int32_t(i));
  ForwardOptions fo;
  fo.logits = a.all ? LogitsMode::All : LogitsMode::Last;
  auto logits = engine.forward((*ctx)->pool(), seq, ForwardInput::from_tokens(ids, pos), fo);
  if (!logits.ok()) return fail(logits.message(), a.json);
  const int V = m.cfg.n_vocab;
  const int rows = int(logits->size() / V);
  if (a.json) {
    json out{
        {"model", model_summary(m)}, {"tokens", ids}, {"n_vocab", V}, {"all_positions", a.all}};
    json rows_j = json::array();
    for (int r = 0; r < rows; ++r)
      rows_j.push_back(
          std::vector<float>(logits->begin() + size_t(r) * V, logits->begin() + size_t(r + 1) * V));
    out["logits"] = std::move(rows_j);
    print_json(out);
    return 0;
  }
  for (int r = 0; r < rows; ++r) {
    const float* l = logits->data() + size_t(r) * V;
    std::vector<int> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    const int k = std::min(a.top, V);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int x, int y) { return l[x] > l[y]; });
    const int position = a.all ? r : int(ids.size()) - 1;
    std::printf("position %d (after token %d):", position, ids[position]);
    for (int i = 0; i < k; ++i) {
      std::string piece = m.tokenizer ? m.tokenizer->decode(-1, idx[i]) : "";
      std::printf("  %d %.6f %s", idx[i], l[idx[i]],
                  json(piece).dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

Runner add_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  add_model_option(app, a->model);
  app.add_option("-z,--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (for -p)")
      ->check(CLI::ExistingFile);
  auto* t = app.add_option("--tokens", a->tokens,
                           "Comma-separated token ids, used as given (include BOS yourself)");
  auto* p = app.add_option("-p,--prompt", a->prompt, "Text, tokenized with BOS first");
  t->excludes(p);
  app.add_flag("--all-positions", a->all, "Logits of every position, not only the last");
  app.add_option("--top", a->top, "Without --json: how many top tokens to show per position")
      ->capture_default_str();
  add_threads_option(app, a->threads);
  add_vl_options(app, a->vl);
  app.add_flag("--json", a->json, "Print {tokens, n_vocab, logits: [[...]]} as JSON");
  return [a] { return run_logits(*a); };
}

}  // namespace kamera::cli
