// kamera generate: prompt -> text, BOS first as llama2.c does.
#include <cstdio>

#include "generate/generator.h"
#include "model/forward.h"
#include "tokenizer/utf8.h"
#include "tools/cli_common.h"
#include "vision/rope_index.h"

namespace kamera::cli {

namespace {

struct GenerateArgs {
  std::string model, tokenizer, prompt;
  int n = 256;
  float temp = 1.0f, top_p = 0.9f, min_p = 0.0f, repeat_penalty = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;
  bool seed_set = false;
  int threads = default_threads();
  std::vector<std::string> stop;
  bool ignore_eos = false, special = false, json = false;
  VlArgs vl;
};

// The prompt as the KV cache receives it, and its text tokens.
struct Prompt {
  std::vector<ChunkContent> pieces;  // text token runs, images and clips at their markers
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

// The generation loop's parameters from the options.
GenerateParams generate_params(const GenerateArgs& a, int n_gen) {
  GenerateParams g;
  g.max_tokens = n_gen;
  g.sampling.temperature = a.temp;
  g.sampling.top_p = a.top_p;
  g.sampling.top_k = a.top_k;
  g.sampling.min_p = a.min_p;
  g.sampling.seed =
      a.seed_set ? a.seed : uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  g.penalties.repeat = a.repeat_penalty;
  g.stop = a.stop;
  g.ignore_eog = a.ignore_eos;
  g.special = a.special;
  return g;
}

// The decoded text of the prompt and the completion (for --json), printed as it comes unless
// --json: a character split across tokens is printed once it is complete.
struct Echo {
  const Tokenizer& tok;
  bool json;
  std::string text{};
  Utf8Stream stream{};

  void print(std::string_view piece) {
    if (json) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  }
  void prompt(const Prompt& p) {
    std::string bytes;
    if (p.echo_first) bytes += tok.decode(-1, p.ids[0]);
    for (size_t i = 1; i < p.ids.size(); ++i) bytes += tok.decode(p.ids[i - 1], p.ids[i]);
    text += bytes;
    print(stream.push(bytes) + stream.flush());
  }
};

// Runs the generation loop from the prompt's logits, one forward per token; it stops at the
// end-of-generation set or BOS unless --ignore-eos, at a --stop string or after n_gen tokens.
// Text after images continues past their largest position component (next_pos).
Result<std::vector<int32_t>> sample_tokens(const GenerateArgs& a, Engine& engine, KvPool& pool,
                                           SeqId seq, std::vector<float> logits, int32_t next_pos,
                                           const Prompt& p, int n_gen, Echo& echo) {
  Generator gen(&echo.tok, generate_params(a, n_gen), p.ids);
  int32_t pos = next_pos;
  auto forward = [&](int32_t next) {
    const Pos at = Pos::linear(pos++);
    return engine.forward(pool, seq, ForwardInput::from_tokens({&next, 1}, {&at, 1}));
  };
  auto end =
      run_generation(gen, std::move(logits), forward, [&](std::string_view t) { echo.print(t); });
  echo.text += gen.text();
  if (!end.ok()) return end.error();
  return gen.tokens();
}

// The timing line on stderr; with --json the result object on stdout.
void report_generation(const GenerateArgs& a, const Model& m, const Prompt& p,
                       const std::vector<int32_t>& out, Echo& echo, double prompt_ms,
                       double gen_ms) {
  if (!a.json) {
    std::printf("\n");
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
  auto out = sample_tokens(a, engine, pool, seq, std::move(*logits), next_pos, p, *n_gen, echo);
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
  app.add_option("--min-p", a->min_p,
                 "Keep the tokens at least this fraction as likely as the best (0 = off)")
      ->capture_default_str();
  app.add_option("--repeat-penalty", a->repeat_penalty,
                 "Penalty of the last 64 tokens' logits, as llama.cpp's (1 = off)")
      ->capture_default_str();
  app.add_option("--seed", a->seed, "Sampling seed (default: from the clock)")
      ->each([a](const std::string&) { a->seed_set = true; });
  app.add_option("--stop", a->stop,
                 "Stop string (repeatable): the text ends right before the first one generated");
  add_threads_option(app, a->threads);
  add_vl_options(app, a->vl);
  app.add_flag("--ignore-eos", a->ignore_eos,
               "Keep generating past the end-of-generation tokens and BOS");
  app.add_flag("--special", a->special, "Print control tokens' text (e.g. <|im_start|>)");
  app.add_flag("--json", a->json,
               "Print one JSON object (text, token ids, timing) instead of text");
  return [a] { return run_generate(*a); };
}

}  // namespace kamera::cli
