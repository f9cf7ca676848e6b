// kamera chat: a multi-turn terminal chat with the model's chat template; the conversation stays
// in the KV cache between turns (context/chat_session.h). Reads stdin line by line, so it can be
// driven by a pipe: printf 'hi\nhow are you\n/quit\n' | kamera chat -m model.gguf --temp 0 -n 8
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "context/chat_session.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct ChatArgs {
  std::string model, tokenizer, chat_template, system;
  int n = 256;
  float temp = 0.8f, top_p = 0.95f;
  int top_k = 40;
  uint64_t seed = 0;
  bool seed_set = false;
  int threads = default_threads();
  int64_t ctx = 0;
  bool verbose = false, no_reuse = false;
};

constexpr const char* kCommands =
    "commands: /system TEXT (set the system message; empty removes it), /reset (forget the "
    "turns), /image PATH (attach an image: needs a vision model), /quit, /help; a line that ends "
    "with '\\' continues on the next; start a message with '//' to send a leading '/'";

// The template: --chat-template, else the GGUF's tokenizer.chat_template, else the built-in that
// fits the architecture.
Result<ChatTemplate> pick_template(const ChatArgs& a, const Model& m) {
  if (!a.chat_template.empty()) return ChatTemplate::from_arg(a.chat_template);
  const Tokenizer& tok = *m.tokenizer;
  if (!tok.vocab().chat_template.empty()) return ChatTemplate::from_gguf(tok.vocab().chat_template);
  const char* name = m.cfg.arch == Arch::Deepseek2                               ? "deepseek2"
                     : m.cfg.arch == Arch::Llama && tok.kind() == VocabKind::Bpe ? "llama3"
                                                                                 : "chatml";
  std::fprintf(stderr, "kamera: note: %s has no chat template; using the built-in '%s'\n",
               m.source.c_str(), name);
  return ChatTemplate::named(name);
}

// The hook for /image PATH: images become embedding chunks of the conversation once a vision
// encoder is wired into the chat (the VLM issue); until then it says so.
Status attach_image(ChatSession& chat, const std::string& path) {
  (void)chat;
  return make_error(ErrorCode::Unsupported,
                    "/image {}: images in chat need a vision model, which kamera chat does not "
                    "load yet",
                    path);
}

// One input line, with '\' continuations joined by newlines; false at the end of input.
bool read_message(std::string& out) {
  out.clear();
  const bool tty = isatty(STDIN_FILENO);
  std::string line;
  if (tty) std::fprintf(stderr, "> ");
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.back() != '\\') {
      out += line;
      return true;
    }
    line.pop_back();
    out += line + "\n";
    if (tty) std::fprintf(stderr, ". ");
  }
  return !out.empty();
}

// Runs a /command; false on /quit.
bool run_command(const std::string& line, ChatSession& chat) {
  const size_t sp = line.find(' ');
  const std::string cmd = line.substr(0, sp);
  const std::string arg = sp == std::string::npos ? "" : line.substr(sp + 1);
  if (cmd == "/quit" || cmd == "/exit") return false;
  if (cmd == "/reset") {
    chat.reset();
    std::fprintf(stderr, "kamera: conversation reset\n");
  } else if (cmd == "/system") {
    chat.set_system(arg);
    std::fprintf(stderr, "kamera: system message %s\n", arg.empty() ? "removed" : "set");
  } else if (cmd == "/image") {
    Status st = attach_image(chat, arg);
    if (!st.ok()) std::fprintf(stderr, "kamera: error: %s\n", st.message().c_str());
  } else if (cmd == "/help") {
    std::fprintf(stderr, "%s\n", kCommands);
  } else {
    std::fprintf(stderr, "kamera: unknown command %s (%s)\n", cmd.c_str(), kCommands);
  }
  return true;
}

int run_chat(const ChatArgs& a) {
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.error(), false);
  const Model& m = **loaded;
  if (!m.tokenizer) return fail(fmt::format("{} has no vocabulary: pass -z", a.model), false);
  auto tmpl = pick_template(a, m);
  if (!tmpl.ok()) return fail(tmpl.error(), false);
  const int64_t kv = a.ctx > 0 ? a.ctx : std::min<int64_t>(m.cfg.ctx_len, 8192);
  auto ctx = context_for(*loaded, a.threads, kv);
  if (!ctx.ok()) return fail(ctx.error(), false);
  ChatOptions o;
  o.max_tokens = a.n;
  o.sampling = {
      a.temp, a.top_k, a.top_p,
      a.seed_set ? a.seed : uint64_t(std::chrono::system_clock::now().time_since_epoch().count())};
  o.reuse_cache = !a.no_reuse;
  auto chat = ChatSession::create(**ctx, std::move(tmpl.value()), std::move(o));
  if (!chat.ok()) return fail(chat.error(), false);
  if (!a.system.empty()) (*chat)->set_system(a.system);
  std::string line;
  for (int turn = 1; read_message(line);) {
    if (line.empty()) continue;
    if (line[0] == '/' && line.compare(0, 2, "//") != 0) {
      if (!run_command(line, **chat)) break;
      continue;
    }
    if (line[0] == '/') line.erase(0, 1);
    TurnStats st;
    auto print = [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
    auto reply = (*chat)->reply(line, print, &st);
    std::printf("\n");
    std::fflush(stdout);
    if (!reply.ok()) {
      std::fprintf(stderr, "kamera: error: %s\n", reply.message().c_str());
      continue;
    }
    if (a.verbose)
      std::fprintf(stderr,
                   "kamera: turn %d: prompt %d tokens, %d reused from the cache, %d prefilled in "
                   "%.1f ms; %d generated in %.1f ms%s\n",
                   turn, st.prompt_tokens, st.reused_tokens, st.prompt_tokens - st.reused_tokens,
                   st.prefill_ms, st.generated_tokens, st.decode_ms,
                   st.stopped_at_eog ? " (end of generation)" : "");
    ++turn;
  }
  return 0;
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  app.footer(
      std::string(
          "Reads messages from stdin, one per line, and prints each reply on stdout.\n"
          "The conversation stays in the KV cache between turns: every turn renders the whole\n"
          "conversation with the chat template and tokenizes it; the tokens the cache already\n"
          "holds as a prefix are reused and only the rest is prefilled. When the new rendering\n"
          "departs from the cached tokens earlier (the template rewrites past turns, /system\n"
          "changed, or a reply re-tokenizes differently), the cache is cut at the first\n"
          "differing token and prefilled from there, so the model always sees exactly the\n"
          "rendered conversation. Generation stops at the vocabulary's end-of-generation tokens\n"
          "(EOS, EOT, <|im_end|>, <|eot_id|>, ...) or after -n tokens.\n") +
      kCommands);
  add_model_option(app, a->model);
  app.add_option("-z,--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (GGUF files embed theirs)")
      ->check(CLI::ExistingFile);
  app.add_option("--chat-template", a->chat_template,
                 "A built-in (chatml, llama3, deepseek2, deepseek3) or a Jinja file; default: the "
                 "model's tokenizer.chat_template, else the built-in for its architecture");
  app.add_option("--system", a->system, "System message");
  app.add_option("-n,--n-predict", a->n, "Most tokens per reply")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--temp", a->temp, "Temperature; 0 = greedy")->capture_default_str();
  app.add_option("--top-p", a->top_p, "Nucleus sampling threshold (1 = off)")
      ->capture_default_str();
  app.add_option("--top-k", a->top_k, "Keep the k most likely tokens (0 = off)")
      ->capture_default_str();
  app.add_option("--seed", a->seed, "Sampling seed (default: from the clock)")
      ->each([a](const std::string&) { a->seed_set = true; });
  app.add_option("-c,--ctx", a->ctx,
                 "KV cache capacity in tokens (default: the model's context, at most 8192)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  add_threads_option(app, a->threads);
  app.add_flag("-v,--verbose", a->verbose,
               "After each reply, print to stderr how many prompt tokens came from the cache");
  app.add_flag("--no-cache-reuse", a->no_reuse,
               "Prefill the whole conversation every turn (for comparison)");
  return [a] { return run_chat(*a); };
}

}  // namespace kamera::cli
