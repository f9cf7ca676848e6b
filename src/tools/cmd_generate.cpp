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

// The prompt as the KV cache receives it, and its text tokens.
struct Prompt {
  std::vector<ChunkContent> pieces;  // text token runs, and images at their <image> markers
  std::vector<int32_t> ids;          // the prompt's text tokens (echoed)
  int n_rows = 0;           // rows the prompt puts in the KV cache (text tokens and image rows)
  bool echo_first = false;  // no BOS in front: print every token
};

// The prompt's pieces (text, or text and images with the --image options); an empty prompt is
// BOS alone, something to condition on.
Result<Prompt> read_prompt(const GenerateArgs& a, const Model& m) {
  const Tokenizer& tok = *m.tokenizer;
  Prompt p;
  if (a.vl.active()) {
    KAMERA_ASSIGN_OR_RETURN(p.pieces, vl_pieces(a.vl, m, a.prompt, a.threads));
  } else {
    p.pieces.push_back(ChunkContent::from_tokens(tok.encode(a.prompt, tok.add_bos())));
  }
  std::erase_if(p.pieces, [](const ChunkContent& c) { return c.n() == 0; });
  for (const ChunkContent& c : p.pieces) {
    p.ids.insert(p.ids.end(), c.tokens.begin(), c.tokens.end());
    p.n_rows += c.n();
  }
  p.echo_first = !tok.add_bos() && !p.ids.empty();
  if (p.ids.empty()) {
    p.ids.push_back(tok.bos());
    p.pieces.insert(p.pieces.begin(), ChunkContent::from_tokens({tok.bos()}));
    p.n_rows += 1;
  }
  return p;
}

// -n, capped (with a note) to the context the prompt leaves.
Result<int> tokens_to_generate(const GenerateArgs& a, int n_rows, int ctx_len) {
  if (a.n < 0) return make_error(ErrorCode::InvalidArgument, "-n must be >= 0");
  if (n_rows >= ctx_len)
    return make_error(ErrorCode::InvalidArgument, "prompt has {} tokens; the model's context is {}",
                      n_rows, ctx_len);
  if (n_rows + a.n <= ctx_len) return a.n;
  const int n_gen = ctx_len - n_rows;
  std::fprintf(stderr, "kamera: note: -n capped to %d by the model's context length %d\n", n_gen,
               ctx_len);
  return n_gen;
}

Sampler make_sampler(const GenerateArgs& a) {
  SamplerParams sp;
  sp.temperature = a.temp;
  sp.top_p = a.top_p;
  sp.top_k = a.top_k;
  sp.seed =
      a.seed_set ? a.seed : uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  return Sampler(sp);
}

// The decoded text of the tokens so far (for --json), printed as it comes unless --json: a
// character split across tokens is printed once it is complete.
struct Echo {
  const Tokenizer& tok;
  bool json;
  std::string text{};
  Utf8Stream stream{};

  void emit(int32_t prev, int32_t t) {
    const std::string bytes = tok.decode(prev, t);
    text += bytes;
    const std::string piece = stream.push(bytes);
    if (!json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
  }
  void prompt(const Prompt& p) {
    if (p.echo_first) emit(-1, p.ids[0]);
    for (size_t i = 1; i < p.ids.size(); ++i) emit(p.ids[i - 1], p.ids[i]);
  }
};

// Samples up to n_gen tokens from the prompt's logits, one forward each; stops at an
// end-of-generation token or BOS unless --ignore-eos. Text after images continues past their
// largest position component (next_pos).
Result<std::vector<int32_t>> sample_tokens(const GenerateArgs& a, Engine& engine, KvPool& pool,
                                           SeqId seq, std::vector<float> logits, int32_t next_pos,
                                           int32_t prev, int n_gen, Echo& echo) {
  Sampler sampler = make_sampler(a);
  std::vector<int32_t> out;
  for (int i = 0; i < n_gen; ++i) {
    const int32_t next = sampler.sample(logits);
    if (!a.ignore_eos && (echo.tok.is_eog(next) || next == echo.tok.bos())) break;
    out.push_back(next);
    echo.emit(prev, next);
    prev = next;
    if (i + 1 == n_gen) break;
    const Pos p = Pos::linear(next_pos + int32_t(out.size()) - 1);
    KAMERA_ASSIGN_OR_RETURN(
        logits, engine.forward(pool, seq, ForwardInput::from_tokens({&next, 1}, {&p, 1})));
  }
  return out;
}

// The timing line on stderr; with --json the result object on stdout.
void report_generation(const GenerateArgs& a, const Model& m, const Prompt& p,
                       const std::vector<int32_t>& out, Echo& echo, double prompt_ms,
                       double gen_ms) {
  if (!a.json) {
    const std::string tail = echo.stream.flush();
    std::printf("%s\n", tail.c_str());
    std::fflush(stdout);
  }
  std::fprintf(stderr,
               "kamera: prompt %zu tokens in %.2f ms (%.1f tok/s); generated %zu tokens in %.2f ms "
               "(%.1f tok/s); %d threads\n",
               size_t(p.n_rows), prompt_ms, p.n_rows / (prompt_ms / 1e3), out.size(), gen_ms,
               out.size() / (gen_ms / 1e3), a.threads);
  if (!a.json) return;
  json j{{"model", model_summary(m)},
         {"prompt_tokens", p.ids},
         {"tokens", out},
         {"text", echo.text},
         {"timing", {{"prompt_ms", prompt_ms}, {"generate_ms", gen_ms}, {"threads", a.threads}}}};
  print_json(j, 2);
}

int run_generate(const GenerateArgs& a) {
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.error(), a.json);
  const Model& m = **loaded;
  if (!m.tokenizer)
    return fail(
        fmt::format("{} has no tokenizer: pass -z tokenizer.bin (llama2.c format)", a.model),
        a.json);
  auto prompt = read_prompt(a, m);
  if (!prompt.ok()) return fail(prompt.error(), a.json);
  const Prompt& p = *prompt;
  auto n_gen = tokens_to_generate(a, p.n_rows, m.cfg.ctx_len);
  if (!n_gen.ok()) return fail(n_gen.message(), a.json);
  auto ctx = context_for(*loaded, a.threads, int64_t(p.n_rows) + *n_gen);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  Engine& engine = (*ctx)->engine();
  KvPool& pool = (*ctx)->pool();
  const SeqId seq = pool.create_sequence();
  Echo echo{*m.tokenizer, a.json};
  echo.prompt(p);

  const double t0 = now_ms();
  int32_t next_pos = 0;
  auto logits = prefill_pieces(engine, pool, seq, p.pieces, 0, LogitsMode::Last, &next_pos);
  if (!logits.ok()) return fail(logits.message(), a.json);
  const double t1 = now_ms();
  auto out =
      sample_tokens(a, engine, pool, seq, std::move(*logits), next_pos, p.ids.back(), *n_gen, echo);
  if (!out.ok()) return fail(out.message(), a.json);
  report_generation(a, m, p, *out, echo, t1 - t0, now_ms() - t1);
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
