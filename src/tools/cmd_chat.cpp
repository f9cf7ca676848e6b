// kamera chat: a multi-turn terminal chat with the model's chat template; the conversation stays
// in the KV cache between turns (context/chat_session.h). Reads stdin line by line, so it can be
// driven by a pipe: printf 'hi\nhow are you\n/quit\n' | kamera chat -m model.gguf --temp 0 -n 8
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "context/chat_session.h"
#include "core/thread_pool.h"
#include "store/disk_tier.h"
#include "tools/cli_common.h"
#include "vision/vl_chat_session.h"

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
  std::string mmproj;               // vision tower: images in the chat
  std::vector<std::string> images;  // with the first user message
  std::string store_dir;            // disk tier: image embeddings (and chunks) across runs
};

// What the loop drives: a text chat (ChatSession) or a chat with images (VlChatSession).
struct ChatDriver {
  std::function<Result<std::string>(std::string, const std::function<void(std::string_view)>&,
                                    TurnStats*)>
      reply;
  std::function<void(std::string)> set_system;
  std::function<void()> reset;
  std::function<Status(const std::string&)> attach_image;
};

template <class Session>
ChatDriver driver_of(Session& s) {
  return {[&s](std::string u, const std::function<void(std::string_view)>& f, TurnStats* st) {
            return s.reply(std::move(u), f, st);
          },
          [&s](std::string t) { s.set_system(std::move(t)); }, [&s] { s.reset(); }, nullptr};
}

constexpr const char* kCommands =
    "commands: /system TEXT (set the system message; empty removes it), /reset (forget the "
    "turns), /image PATH (attach a PNG or JPEG to the next message: needs --mmproj), /quit, /help; "
    "a line that ends "
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

// /image PATH without a vision tower.
Status no_images(const std::string& path) {
  return make_error(ErrorCode::InvalidArgument,
                    "/image {}: images need a vision tower: start kamera chat with --mmproj", path);
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
bool run_command(const std::string& line, ChatDriver& chat) {
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
    Status st = chat.attach_image(arg);
    if (!st.ok()) std::fprintf(stderr, "kamera: error: %s\n", st.message().c_str());
    if (st.ok()) std::fprintf(stderr, "kamera: image attached to the next message\n");
  } else if (cmd == "/help") {
    std::fprintf(stderr, "%s\n", kCommands);
  } else {
    std::fprintf(stderr, "kamera: unknown command %s (%s)\n", cmd.c_str(), kCommands);
  }
  return true;
}

// Reads messages until the end of input or /quit, printing each reply.
void chat_loop(const ChatArgs& a, ChatDriver& chat) {
  std::string line;
  for (int turn = 1; read_message(line);) {
    if (line.empty()) continue;
    if (line[0] == '/' && line.compare(0, 2, "//") != 0) {
      if (!run_command(line, chat)) break;
      continue;
    }
    if (line[0] == '/') line.erase(0, 1);
    TurnStats st;
    auto print = [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
    auto reply = chat.reply(line, print, &st);
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
}

// kamera chat --mmproj: the chat with images; --image files go with the first message.
int run_vl_chat(const ChatArgs& a, Context& ctx, ChatTemplate tmpl, ChatOptions o) {
  auto tower = QwenVisionModel::load(a.mmproj);
  if (!tower.ok()) return fail(tower.error(), false);
  ThreadPool threads(std::max(1, a.threads));
  auto chat = VlChatSession::create(ctx, std::move(tmpl), std::move(o), *tower, &threads);
  if (!chat.ok()) return fail(chat.error(), false);
  VlChatSession& c = **chat;
  if (!a.system.empty()) c.set_system(a.system);
  for (const std::string& path : a.images) {
    Status st = c.attach_image(path);
    if (!st.ok()) return fail(st.error(), false);
  }
  ChatDriver d = driver_of(c);
  d.attach_image = [&c](const std::string& path) { return c.attach_image(path); };
  chat_loop(a, d);
  if (a.verbose)
    std::fprintf(stderr,
                 "kamera: %lld image(s) encoded, %lld found in the session's cache, %lld read "
                 "from the store\n",
                 (long long)c.image_stats().encodes, (long long)c.image_stats().hits,
                 (long long)c.image_stats().store_hits);
  return 0;
}

int run_chat(const ChatArgs& a) {
  if (!a.images.empty() && a.mmproj.empty())
    return fail("--image needs --mmproj (the vision tower)", false);
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.error(), false);
  const Model& m = **loaded;
  if (!m.tokenizer) return fail(fmt::format("{} has no vocabulary: pass -z", a.model), false);
  auto tmpl = pick_template(a, m);
  if (!tmpl.ok()) return fail(tmpl.error(), false);
  const int64_t kv = a.ctx > 0 ? a.ctx : std::min<int64_t>(m.cfg.ctx_len, 8192);
  auto ctx = context_for(*loaded, a.threads, kv);
  if (!ctx.ok()) return fail(ctx.error(), false);
  if (!a.store_dir.empty()) {  // its key is made in the directory (store.key, mode 0600)
    auto disk = DiskTier::open(a.store_dir, m.fingerprint, m.kv_layout());
    if (!disk.ok()) return fail(disk.error(), false);
    (*ctx)->store().add_tier(*disk);
  }
  ChatOptions o;
  o.gen.max_tokens = a.n;
  o.gen.sampling = {
      a.temp, a.top_k, a.top_p,
      a.seed_set ? a.seed : uint64_t(std::chrono::system_clock::now().time_since_epoch().count())};
  o.reuse_cache = !a.no_reuse;
  if (!a.mmproj.empty()) return run_vl_chat(a, **ctx, std::move(tmpl.value()), std::move(o));
  auto chat = ChatSession::create(**ctx, std::move(tmpl.value()), std::move(o));
  if (!chat.ok()) return fail(chat.error(), false);
  if (!a.system.empty()) (*chat)->set_system(a.system);
  ChatDriver d = driver_of(**chat);
  d.attach_image = no_images;
  chat_loop(a, d);
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
          "rendered conversation. With --mmproj (a Qwen2-VL / Qwen2.5-VL tower), --image and\n"
          "/image attach pictures to the next message, each written as <|vision_start|> image\n"
          "<|vision_end|> before its text; a picture is encoded once and stays in the cache\n"
          "with the conversation. Generation stops at the vocabulary's end-of-generation tokens\n"
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
  app.add_option("--mmproj", a->mmproj,
                 "Vision tower in llama.cpp's mmproj GGUF (Qwen2-VL / Qwen2.5-VL; -m a qwen2vl "
                 "decoder): enables --image and /image")
      ->check(CLI::ExistingFile);
  app.add_option("--image", a->images,
                 "PNG or JPEG image sent with the first message (repeatable; needs --mmproj)")
      ->check(CLI::ExistingFile);
  app.add_option("--store-dir", a->store_dir,
                 "Disk tier of the chunk store (as kamera serve's): image embeddings kept there "
                 "are read back instead of running the vision tower again");
  return [a] { return run_chat(*a); };
}

}  // namespace kamera::cli
