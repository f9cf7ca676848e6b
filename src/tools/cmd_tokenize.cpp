// kamera tokenize / detokenize: text <-> token ids with a model's own vocabulary.
// A GGUF file's tokenizer is read without its weights, so this is quick on any model size.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "gguf/gguf.h"
#include "tokenizer/gguf_import.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct TokenizerHolder {
  std::shared_ptr<const Model> model;  // llama2.c checkpoints: the tokenizer lives in the model
  std::optional<Tokenizer> own;        // GGUF: read alone
  const Tokenizer& tok() const { return own ? *own : *model->tokenizer; }
};

bool is_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string_view(magic, 4) == "GGUF";
}

Result<TokenizerHolder> load_tokenizer(const std::string& path, const std::string& tokenizer_bin) {
  TokenizerHolder h;
  if (is_gguf(path) && tokenizer_bin.empty()) {
    KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
    KAMERA_ASSIGN_OR_RETURN(Tokenizer tok, tokenizer_from_gguf(*file));
    h.own = std::move(tok);
    return h;
  }
  KAMERA_ASSIGN_OR_RETURN(h.model, load_for_cli(path, tokenizer_bin));
  if (!h.model->tokenizer)
    return make_error(ErrorCode::NotFound, "{} has no tokenizer (pass -z tokenizer.bin)", path);
  return h;
}

struct TokenizeArgs {
  std::string model, tokenizer, prompt, file;
  bool no_bos = false, no_special = false, json = false, ids_only = false;
};

int run_tokenize(const TokenizeArgs& a) {
  const double t_load = now_ms();
  auto h = load_tokenizer(a.model, a.tokenizer);
  if (!h.ok()) return fail(h.message(), a.json);
  const Tokenizer& tok = h->tok();
  std::string text = a.prompt;
  if (!a.file.empty()) {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) return fail(fmt::format("-f {}: cannot open file", a.file), a.json);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const double t0 = now_ms();
  std::vector<int32_t> ids;
  if (tok.add_bos() && !a.no_bos) ids.push_back(tok.bos());
  const std::vector<int32_t> body =
      tok.tokenize(text, {.add_special = false, .parse_special = !a.no_special});
  ids.insert(ids.end(), body.begin(), body.end());
  if (tok.add_eos() && tok.eos() >= 0) ids.push_back(tok.eos());
  const double ms = now_ms() - t0;
  std::fprintf(stderr,
               "kamera: %zu bytes -> %zu tokens in %.2f ms (%.1f MB/s); vocabulary loaded in "
               "%.1f ms\n",
               text.size(), ids.size(), ms, text.size() / 1e3 / std::max(ms, 1e-3), t0 - t_load);
  if (a.json) {
    json pieces = json::array();
    for (int32_t id : ids) pieces.push_back(tok.piece(id));
    print_json(json{{"tokens", ids}, {"pieces", pieces}});
    return 0;
  }
  std::string out;
  if (a.ids_only) {
    out = fmt::format("[{}]\n", fmt::join(ids, ", "));
  } else {
    for (int32_t id : ids) out += fmt::format("{:6d} -> '{}'\n", id, tok.piece(id));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

struct DetokenizeArgs {
  std::string model, tokenizer, tokens;
  bool json = false;
};

int run_detokenize(const DetokenizeArgs& a) {
  auto h = load_tokenizer(a.model, a.tokenizer);
  if (!h.ok()) return fail(h.message(), a.json);
  const Tokenizer& tok = h->tok();
  auto ids = parse_token_list(a.tokens);
  if (!ids.ok()) return fail(ids.message(), a.json);
  for (int32_t id : *ids)
    if (id < 0 || id >= tok.n_vocab())
      return fail(
          fmt::format("--tokens: id {} is outside the vocabulary [0, {})", id, tok.n_vocab()),
          a.json);
  const std::string text = tok.decode_all(*ids);
  if (a.json) {
    json pieces = json::array();
    for (int32_t id : *ids) pieces.push_back(tok.piece(id));
    print_json(json{{"text", text}, {"pieces", pieces}});
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

void add_tokenizer_options(CLI::App& app, std::string& model, std::string& tokenizer) {
  add_model_option(app, model);
  app.add_option("-z,--tokenizer", tokenizer, "llama2.c tokenizer.bin (GGUF files embed theirs)")
      ->check(CLI::ExistingFile);
}

}  // namespace

Runner add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  add_tokenizer_options(app, a->model, a->tokenizer);
  auto* p = app.add_option("-p,--prompt", a->prompt, "Text to tokenize");
  auto* f =
      app.add_option("-f,--file", a->file, "Read the text from a file")->check(CLI::ExistingFile);
  p->excludes(f);
  app.add_flag("--no-bos", a->no_bos, "Do not add BOS even where the vocabulary asks for it");
  app.add_flag("--no-special", a->no_special,
               "Read control tokens written in the text (<|im_start|>, ...) as plain text");
  app.add_flag("--json", a->json, "Print {\"tokens\": [...], \"pieces\": [...]}");
  app.add_flag("--ids", a->ids_only, "Print only the ids, as [1, 2, 3]");
  return [a] { return run_tokenize(*a); };
}

Runner add_detokenize(CLI::App& app) {
  auto a = std::make_shared<DetokenizeArgs>();
  add_tokenizer_options(app, a->model, a->tokenizer);
  app.add_option("--tokens", a->tokens, "Comma-separated token ids, e.g. 1,2,3")->required();
  app.add_flag("--json", a->json, "Print {\"text\": ..., \"pieces\": [...]}");
  return [a] { return run_detokenize(*a); };
}

}  // namespace kamera::cli
