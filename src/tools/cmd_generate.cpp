// kamera generate: prompt -> text, BOS first as llama2.c does.
#include <cstdio>

#include "model/forward.h"
#include "model/sampler.h"
#include "tokenizer/utf8.h"
#include "tools/cli_common.h"
#include "vision/rope_index.h"

namespace kamera::cli {

namespace {

struct GenerateArgs {
  std::string model, tokenizer, prompt;
  int n = 256;
  float temp = 1.0f, top_p = 0.9f;
  int top_k = 0;
  uint64_t seed = 0;
  bool seed_set = false;
  int threads = default_threads();
  bool ignore_eos = false, json = false;
  VlArgs vl;
};

int run_generate(const GenerateArgs& a) {
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.error(), a.json);
  const Model& m = **loaded;
  const ModelConfig& c = m.cfg;
  if (!m.tokenizer)
    return fail(
        fmt::format("{} has no tokenizer: pass -z tokenizer.bin (llama2.c format)", a.model),
        a.json);
  const Tokenizer& tok = *m.tokenizer;
  std::vector<ChunkContent> pieces;  // text token runs, and images at their <image> markers
  if (a.vl.active()) {
    auto p = vl_pieces(a.vl, m, a.prompt, a.threads);
    if (!p.ok()) return fail(p.error(), a.json);
    pieces = std::move(*p);
  } else {
    pieces.push_back(ChunkContent::from_tokens(tok.encode(a.prompt, tok.add_bos())));
  }
  std::erase_if(pieces, [](const ChunkContent& c) { return c.n() == 0; });
  std::vector<int32_t> ids;  // the prompt's text tokens (echoed)
  int n_rows = 0;            // rows the prompt puts in the KV cache (text tokens and image rows)
  for (const ChunkContent& c : pieces) {
    ids.insert(ids.end(), c.tokens.begin(), c.tokens.end());
    n_rows += c.n();
  }
  const bool echo_first = !tok.add_bos() && !ids.empty();  // no BOS in front: print every token
  if (ids.empty()) {                                       // something to condition on
    ids.push_back(tok.bos());
    pieces.insert(pieces.begin(), ChunkContent::from_tokens({tok.bos()}));
    n_rows += 1;
  }
  if (a.n < 0) return fail("-n must be >= 0", a.json);
  int n_gen = a.n;
  if (n_rows >= c.ctx_len)
    return fail(fmt::format("prompt has {} tokens; the model's context is {}", n_rows, c.ctx_len),
                a.json);
  if (n_rows + n_gen > c.ctx_len) {
    n_gen = c.ctx_len - n_rows;
    std::fprintf(stderr, "kamera: note: -n capped to %d by the model's context length %d\n", n_gen,
                 c.ctx_len);
  }

  auto ctx = context_for(*loaded, a.threads, int64_t(n_rows) + n_gen);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  Engine& engine = (*ctx)->engine();
  KvPool& pool = (*ctx)->pool();
  const SeqId seq = pool.create_sequence();
  SamplerParams sp;
  sp.temperature = a.temp;
  sp.top_p = a.top_p;
  sp.top_k = a.top_k;
  sp.seed =
      a.seed_set ? a.seed : uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  Sampler sampler(sp);

  std::string text;
  Utf8Stream stream;  // a character split across tokens is printed once it is complete
  auto emit = [&](int32_t prev, int32_t t) {
    const std::string bytes = tok.decode(prev, t);
    text += bytes;
    const std::string piece = stream.push(bytes);
    if (!a.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
  };
  if (echo_first) emit(-1, ids[0]);
  for (size_t i = 1; i < ids.size(); ++i) emit(ids[i - 1], ids[i]);

  const double t0 = now_ms();
  int32_t next_pos = 0;  // text after images continues past their largest position component
  auto logits = prefill_pieces(engine, pool, seq, pieces, 0, LogitsMode::Last, &next_pos);
  if (!logits.ok()) return fail(logits.message(), a.json);
  const double t1 = now_ms();
  std::vector<int32_t> out;
  int32_t prev = ids.back();
  for (int i = 0; i < n_gen; ++i) {
    const int32_t next = sampler.sample(*logits);
    if (!a.ignore_eos && (tok.is_eog(next) || next == tok.bos())) break;
    out.push_back(next);
    emit(prev, next);
    prev = next;
    if (i + 1 == n_gen) break;
    const Pos p = Pos::linear(next_pos + int32_t(out.size()) - 1);
    logits = engine.forward(pool, seq, ForwardInput::from_tokens({&next, 1}, {&p, 1}));
    if (!logits.ok()) return fail(logits.message(), a.json);
  }
  const double t2 = now_ms();
  const double gen_ms = t2 - t1;
  if (!a.json) {
    const std::string tail = stream.flush();
    std::printf("%s\n", tail.c_str());
    std::fflush(stdout);
  }
  std::fprintf(stderr,
               "kamera: prompt %zu tokens in %.2f ms (%.1f tok/s); generated %zu tokens in %.2f ms "
               "(%.1f tok/s); %d threads\n",
               size_t(n_rows), t1 - t0, n_rows / ((t1 - t0) / 1e3), out.size(), gen_ms,
               out.size() / (gen_ms / 1e3), a.threads);
  if (a.json) {
    json j{{"model", model_summary(m)},
           {"prompt_tokens", ids},
           {"tokens", out},
           {"text", text},
           {"timing", {{"prompt_ms", t1 - t0}, {"generate_ms", gen_ms}, {"threads", a.threads}}}};
    print_json(j, 2);
  }
  return 0;
}

}  // namespace

Runner add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  add_model_option(app, a->model);
  app.add_option("-z,--tokenizer", a->tokenizer,
                 "llama2.c tokenizer.bin (default: tokenizer.bin or tok<vocab>.bin next to the "
                 "model; GGUF files embed theirs)")
      ->check(CLI::ExistingFile);
  app.add_option("-p,--prompt", a->prompt, "Prompt text (default: empty, i.e. BOS only)");
  app.add_option("-n,--n-predict", a->n, "Tokens to generate (stops early at EOS or BOS)")
      ->capture_default_str();
  app.add_option("--temp", a->temp, "Temperature; 0 = greedy (argmax)")->capture_default_str();
  app.add_option("--top-p", a->top_p, "Nucleus sampling threshold (1 = off)")
      ->capture_default_str();
  app.add_option("--top-k", a->top_k, "Keep the k most likely tokens (0 = off)")
      ->capture_default_str();
  app.add_option("--seed", a->seed, "Sampling seed (default: from the clock)")
      ->each([a](const std::string&) { a->seed_set = true; });
  add_threads_option(app, a->threads);
  add_vl_options(app, a->vl);
  app.add_flag("--ignore-eos", a->ignore_eos, "Keep generating past EOS/BOS");
  app.add_flag("--json", a->json,
               "Print one JSON object (text, token ids, timing) instead of text");
  return [a] { return run_generate(*a); };
}

}  // namespace kamera::cli
