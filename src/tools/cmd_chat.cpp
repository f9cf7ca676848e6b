// kamera chat: a multi-turn terminal chat with the model's chat template; the conversation stays
// in the KV cache between turns (context/chat_session.h). On a terminal: a banner, line editing
// and history (tools/chat_line.h), Ctrl-C stops a reply; from a pipe it reads line by line:
// printf 'hi\nhow are you\n/quit\n' | kamera chat -m model.gguf --temp 0 -n 8
#include <fmt/format.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "audio/audio_chunks.h"
#include "audio/audio_tower.h"
#include "context/chat_session.h"
#include "media/audio_file.h"
#include "store/disk_tier.h"
#include "tools/chat_line.h"
#include "tools/chat_reasoning.h"
#include "tools/cli_common.h"
#include "vision/media_tower.h"
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
  bool verbose = false, no_reuse = false, special = false;
  std::string reuse = "patch";      // the reuse policy of every turn (cache/reuse_policy.h)
  double reuse_budget = 0;          // patch: the repair budget (cache/repair_plan.h)
  std::string history;              // the terminal's line history ("": not kept)
  std::string mmproj;               // vision tower: images in the chat
  std::vector<std::string> images;  // with the first user message
  std::vector<std::string> audios;  // audio clips with the first user message (an audio tower)
  std::string store_dir;            // disk tier: image embeddings (and chunks) across runs
  std::string reasoning = "show";   // a thinking model's reasoning: show, hide, raw
};

// What the loop drives: a text chat (ChatSession) or a chat with images (VlChatSession).
struct ChatDriver {
  std::function<Result<std::string>(std::string, const std::function<void(std::string_view)>&,
                                    TurnStats*)>
      reply;
  std::function<void(std::string)> set_system;
  std::function<void()> reset;
  std::function<Status(const std::string&)> attach_image;
  std::function<Status(const std::string&)> attach_audio;
  std::function<std::vector<ChatMessage>()> messages;
  std::function<void(std::vector<ChatMessage>)> set_messages;
  std::function<int()> images_in_conversation = [] { return 0; };
};

template <class Session>
ChatDriver driver_of(Session& s) {
  ChatDriver d;
  d.reply = [&s](std::string u, const std::function<void(std::string_view)>& f, TurnStats* st) {
    return s.reply(std::move(u), f, st);
  };
  d.set_system = [&s](std::string t) { s.set_system(std::move(t)); };
  d.reset = [&s] { s.reset(); };
  d.messages = [&s] { return s.messages(); };
  d.set_messages = [&s](std::vector<ChatMessage> m) { s.set_messages(std::move(m)); };
  return d;
}

constexpr const char* kCommands =
    "commands: /system TEXT (set the system message; empty removes it), /reset (forget the "
    "turns), /image PATH (attach a PNG or JPEG to the next message: needs --mmproj), /audio "
    "PATH (attach a WAV, FLAC or MP3 clip to the next message: needs an audio --mmproj), /save "
    "FILE "
    "(the conversation as OpenAI chat messages, JSON), /load FILE (replace the conversation by "
    "one saved so), /quit, /help; a line that ends with '\\' continues on the next; start a "
    "message with '//' to send a leading '/'";

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

// /audio PATH without an audio tower.
Status no_audio(const std::string& path) {
  return make_error(ErrorCode::InvalidArgument,
                    "/audio {}: audio needs an audio tower: start kamera chat with --mmproj and "
                    "an audio tower's mmproj (Qwen2.5-Omni's)",
                    path);
}

// A clip file through the session's audio tower (16 kHz, as the server decodes input_audio).
Status attach_clip(VlChatSession& c, const std::string& path) {
  if (!c.takes_audio())
    return make_error(ErrorCode::InvalidArgument,
                      "--audio {}: the --mmproj tower is a picture tower; audio needs an audio "
                      "tower's mmproj (Qwen2.5-Omni's)",
                      path);
  KAMERA_ASSIGN_OR_RETURN(const AudioClip clip, load_audio(path, kAudioSampleRate));
  return c.attach_audio(clip.samples);
}

// /save FILE: {"messages": [{"role", "content"}, ...]}, what /v1/chat/completions takes.
Status save_conversation(const std::string& path, ChatDriver& chat) {
  nlohmann::json msgs = nlohmann::json::array();
  for (const ChatMessage& m : chat.messages())
    msgs.push_back({{"role", m.role}, {"content", m.content}});
  std::ofstream f(path);
  f << nlohmann::json{{"messages", msgs}}.dump(1) << "\n";
  if (!f.good()) return make_error(ErrorCode::Io, "/save {}: cannot write the file", path);
  if (chat.images_in_conversation() > 0)
    std::fprintf(stderr, "kamera: note: the %d image(s) of the conversation are not saved\n",
                 chat.images_in_conversation());
  return Status::Ok();
}

// /load FILE: a conversation saved by /save (or any {"messages": [...]} of string contents).
Status load_conversation(const std::string& path, ChatDriver& chat) {
  std::ifstream f(path);
  if (!f) return make_error(ErrorCode::NotFound, "/load {}: cannot open the file", path);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array())
    return make_error(ErrorCode::InvalidArgument, "/load {}: not a {{\"messages\": [...]}} file",
                      path);
  std::vector<ChatMessage> msgs;
  for (const auto& m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      return make_error(ErrorCode::InvalidArgument,
                        "/load {}: message {} needs a string role and a string content", path,
                        msgs.size());
    msgs.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  chat.set_messages(std::move(msgs));
  return Status::Ok();
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
  } else if (cmd == "/audio") {
    Status st = chat.attach_audio(arg);
    if (!st.ok()) std::fprintf(stderr, "kamera: error: %s\n", st.message().c_str());
    if (st.ok()) std::fprintf(stderr, "kamera: audio clip attached to the next message\n");
  } else if (cmd == "/save" || cmd == "/load") {
    Status st = cmd == "/save" ? save_conversation(arg, chat) : load_conversation(arg, chat);
    if (!st.ok()) std::fprintf(stderr, "kamera: error: %s\n", st.message().c_str());
    if (st.ok())
      std::fprintf(stderr, "kamera: conversation %s %s (%zu messages)\n",
                   cmd == "/save" ? "saved to" : "loaded from", arg.c_str(),
                   chat.messages().size());
  } else if (cmd == "/help") {
    std::fprintf(stderr, "%s\n", kCommands);
  } else {
    std::fprintf(stderr, "kamera: unknown command %s (%s)\n", cmd.c_str(), kCommands);
  }
  return true;
}

// Where each run of the turn's prompt came from, in order: "prefix 41 | context-nearest 18 |
// recomputed 9" (the sources of usage.kamera.segments; -v).
void print_spans(const std::vector<ServedSegment>& spans) {
  std::string line;
  for (const ServedSegment& s : spans) {
    if (!line.empty() && line.back() != ' ') line += " | ";
    line +=
        fmt::format("{}{} {}", span_source_name(s.source), s.repaired ? " (repair)" : "", s.tokens);
  }
  if (!spans.empty()) std::fprintf(stderr, "kamera:   served: %s\n", line.c_str());
}

// Whether the turn of `user` opens the reasoning in its prompt (the template's generation prompt
// writes <think>): the reply then starts inside it.
bool opens_reasoning(const ChatTemplate& tmpl, ChatDriver& chat, const std::string& user) {
  std::vector<ChatMessage> msgs = chat.messages();
  msgs.push_back({"user", user});
  auto prompt = tmpl.render(msgs, ChatRenderOptions{});
  return prompt.ok() && toolcall::prompt_opens_reasoning(*prompt);
}

// Reads messages until the end of input or /quit, printing each reply (a thinking model's
// reasoning as --reasoning says: tools/chat_reasoning.h).
void chat_loop(const ChatArgs& a, const ChatTemplate& tmpl, ChatDriver& chat, ChatInput& in) {
  const ReasoningView view = a.reasoning == "hide"  ? ReasoningView::Hide
                             : a.reasoning == "raw" ? ReasoningView::Raw
                                                    : ReasoningView::Show;
  const bool thinks = toolcall::has_reasoning_markers(tmpl.source());
  std::string line;
  for (int turn = 1; in.read_message(line);) {
    if (line.empty()) continue;
    if (line[0] == '/' && line.compare(0, 2, "//") != 0) {
      if (!run_command(line, chat)) break;
      continue;
    }
    if (line[0] == '/') line.erase(0, 1);
    TurnStats st;
    ReasoningPrinter printer(view, tmpl.source(), thinks && opens_reasoning(tmpl, chat, line),
                             in.tty(), stdout);
    in.begin_reply();
    auto reply = chat.reply(
        line, [&printer](std::string_view t) { printer.feed(t); }, &st);
    in.end_reply();
    printer.finish();
    std::printf("\n");
    std::fflush(stdout);
    if (!reply.ok()) {
      std::fprintf(stderr, "kamera: error: %s\n", reply.message().c_str());
      continue;
    }
    if (auto kept = harmony_history(tmpl.source(), *reply)) {  // gpt-oss: the final channel
      std::vector<ChatMessage> msgs = chat.messages();
      msgs.back() = std::move(*kept);
      chat.set_messages(std::move(msgs));
    }
    if (st.cancelled) std::fprintf(stderr, "kamera: reply stopped (kept in the conversation)\n");
    if (a.verbose)
      std::fprintf(stderr,
                   "kamera: turn %d: prompt %d tokens, %d reused from the cache, %d prefilled in "
                   "%.1f ms; %d generated in %.1f ms%s\n",
                   turn, st.prompt_tokens, st.reused_tokens, st.prompt_tokens - st.reused_tokens,
                   st.prefill_ms, st.generated_tokens, st.decode_ms,
                   st.stopped_at_eog ? " (end of generation)"
                   : st.cancelled    ? " (stopped)"
                                     : "");
    if (a.verbose) print_spans(st.spans);
    ++turn;
  }
}

// kamera chat --mmproj: the chat with images or audio clips; --image and --audio files go with
// the first message (pictures first, then clips). The tower by the mmproj's projector type
// (audio/audio_tower.h load_media_tower: every family the server takes, the audio towers too).
int run_vl_chat(const ChatArgs& a, Context& ctx, ChatTemplate tmpl, ChatOptions o, ChatInput& in) {
  const ChatTemplate shown = tmpl;  // the session keeps its own
  auto tower = load_media_tower(a.mmproj, ctx.model(), std::max(1, a.threads), &ctx.store());
  if (!tower.ok()) return fail(tower.error(), false);
  auto chat = VlChatSession::create(ctx, std::move(tmpl), std::move(o), std::move(*tower));
  if (!chat.ok()) return fail(chat.error(), false);
  VlChatSession& c = **chat;
  if (!a.system.empty()) c.set_system(a.system);
  for (const std::string& path : a.images) {
    Status st = c.attach_image(path);
    if (!st.ok()) return fail(st.error(), false);
  }
  for (const std::string& path : a.audios) {
    Status st = attach_clip(c, path);
    if (!st.ok()) return fail(st.error(), false);
  }
  ChatDriver d = driver_of(c);
  d.attach_image = [&c](const std::string& path) { return c.attach_image(path); };
  d.attach_audio = [&c](const std::string& path) { return attach_clip(c, path); };
  d.images_in_conversation = [&c] { return c.images_in_conversation(); };
  chat_loop(a, shown, d, in);
  if (a.verbose)
    std::fprintf(stderr,
                 "kamera: %lld image(s) encoded, %lld found in the session's cache, %lld read "
                 "from the store\n",
                 (long long)c.image_stats().encodes, (long long)c.image_stats().hits,
                 (long long)c.image_stats().store_hits);
  return 0;
}

// What llama-cli users look for first: the model, the template, the context, the threads and the
// commands (on stderr: stdout carries the replies only).
void print_banner(const ChatArgs& a, const Model& m, const ChatTemplate& tmpl, int64_t kv,
                  bool tty) {
  std::fprintf(stderr,
               "kamera chat\n"
               "model     %s (%s, %d layers, width %d, vocabulary %d%s)\n"
               "template  %s%s\n"
               "context   %lld tokens of KV (the model's: %d) · threads %d · cache reuse %s\n"
               "sampling  temperature %.2f, top-k %d, top-p %.2f, at most %d tokens a reply\n",
               m.source.c_str(), arch_name(m.cfg.arch), m.cfg.n_layers, m.cfg.dim, m.cfg.n_vocab,
               a.mmproj.empty() ? "" : ", vision tower --mmproj", tmpl.name().c_str(),
               a.special ? " · special tokens shown (--special)" : "", (long long)kv, m.cfg.ctx_len,
               a.threads, a.no_reuse ? "off" : a.reuse.c_str(), a.temp, a.top_k, a.top_p, a.n);
  std::fprintf(stderr, "%s\n%s\n\n", kCommands,
               tty ? "Ctrl-C stops a reply (the conversation keeps it); Ctrl-C at the prompt "
                     "exits. Up/Down: history; line editing as in a shell."
                   : "Reading messages from stdin, one per line.");
}

int run_chat(const ChatArgs& a) {
  if (!a.images.empty() && a.mmproj.empty())
    return fail("--image needs --mmproj (the vision tower)", false);
  if (!a.audios.empty() && a.mmproj.empty())
    return fail("--audio needs --mmproj (an audio tower: Qwen2.5-Omni's)", false);
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
  const auto policy = reuse_policy_named(a.reuse);
  if (!policy) return fail(fmt::format("--reuse: unknown policy \"{}\"", a.reuse), false);
  o.policy = *policy;
  if (a.reuse_budget > 0 && o.policy != ReusePolicy::Patch)
    return fail(fmt::format("--reuse-budget needs --reuse patch ({} has no repair)", a.reuse),
                false);
  o.reuse_budget = a.reuse_budget;
  o.gen.special = a.special;
  o.gen.text_only = !a.special;
  ChatInput in(a.history);
  o.cancel = in.cancel_flag();
  print_banner(a, m, *tmpl, kv, in.tty());
  if (!a.mmproj.empty()) return run_vl_chat(a, **ctx, std::move(tmpl.value()), std::move(o), in);
  auto chat = ChatSession::create(**ctx, std::move(tmpl.value()), std::move(o));
  if (!chat.ok()) return fail(chat.error(), false);
  if (!a.system.empty()) (*chat)->set_system(a.system);
  ChatDriver d = driver_of(**chat);
  d.attach_image = no_images;
  d.attach_audio = no_audio;
  chat_loop(a, (*chat)->chat_template(), d, in);
  return 0;
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  if (const char* home = std::getenv("HOME"); home && *home)
    a->history = std::string(home) + "/.kamera_history";
  app.footer(
      std::string(
          "Reads messages from stdin, one per line, and prints each reply on stdout.\n"
          "The conversation stays in the KV cache between turns: every turn renders the whole\n"
          "conversation with the chat template and tokenizes it; the tokens the cache already\n"
          "holds as a prefix are reused and only the rest is prefilled. When the new rendering\n"
          "departs from the cached tokens earlier (the template rewrites past turns, /system\n"
          "changed, or a reply re-tokenizes differently), the cache is cut at the first\n"
          "differing token and prefilled from there, so the model always sees exactly the\n"
          "rendered conversation. With --mmproj (a Qwen2-VL / Qwen2.5-VL / Qwen3-VL tower, or\n"
          "Kimi-VL's, SmolVLM's, Gemma 3's, InternVL's or LLaVA-1.5's beside its decoder),\n"
          "--image and /image attach pictures to the next message, each written before its\n"
          "text between the tower's delimiters (<|vision_start|> image <|vision_end|>; Kimi-VL:\n"
          "<|media_start|>image<|media_content|> image <|media_end|> where the vocabulary has\n"
          "them; Gemma 3: <start_of_image> image <end_of_image>; InternVL: <img> image </img>;\n"
          "SmolVLM's tiles carry their own tokens; LLaVA's rows stand alone); a picture is\n"
          "encoded once and\n"
          "stays in the cache with the conversation. With an audio tower's --mmproj\n"
          "(Qwen2.5-Omni's beside its qwen2vl thinker), --audio and /audio attach WAV, FLAC or\n"
          "MP3 clips the same way, decoded and resampled to 16 kHz as the server decodes an\n"
          "input_audio part, written between <|audio_bos|> and <|audio_eos|> (rows on positions\n"
          "(i, i, i)) and kept in the cache across turns as a picture is.\n"
          "Generation stops at the vocabulary's "
          "end-of-generation tokens\n"
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
               "After each reply, print to stderr how many prompt tokens came from the cache and "
               "where each run of the prompt came from (prefix, context-exact, context-nearest, "
               "patch-*, recomputed: the sources of the server's usage.kamera.segments)");
  app.add_option("--reuse", a->reuse,
                 "How each turn reuses cached KV: patch (the exact prefix, then every message seen "
                 "in an earlier context, conditioned on the nearest one), prefix (exact prefix "
                 "only: replies as a full prefill), keep, blind, reprefill")
      ->capture_default_str()
      ->check(CLI::IsMember({"patch", "prefix", "keep", "blind", "reprefill"}));
  app.add_option("--reuse-budget", a->reuse_budget,
                 "With --reuse patch: the share (0 to 1) of each turn's tokens served from another "
                 "context that may be recomputed in context instead, the messages whose context "
                 "differs most first (0: none; 1: a full prefill's replies)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--reasoning", a->reasoning,
                 "A thinking model's reasoning (the <think> block its chat template has it "
                 "write, gpt-oss's harmony analysis channel): show (printed above the answer, "
                 "every line prefixed by '| ', dimmed on "
                 "a terminal), hide (not printed; the conversation keeps it as the template "
                 "decides), raw (left in the reply as the model wrote it, markers included; for "
                 "harmony: every channel with its <|channel|> headers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"show", "hide", "raw"}));
  app.add_flag("--special", a->special,
               "Print special tokens (<|im_end|>, <|fim_middle|>, ...) in replies; by default "
               "they print nothing");
  app.add_option("--history", a->history,
                 "Where the terminal's line history is kept (\"\": not kept)")
      ->capture_default_str();
  app.add_flag("--no-cache-reuse", a->no_reuse,
               "Prefill the whole conversation every turn (for comparison)");
  app.add_option(
         "--mmproj", a->mmproj,
         "Vision or audio tower in llama.cpp's mmproj GGUF (Qwen2-VL / Qwen2.5-VL / Qwen3-VL "
         "beside a qwen2vl / qwen3vl decoder, Kimi-VL beside a deepseek2 one, SmolVLM or "
         "LLaVA-1.5 beside a llama one, Gemma 3 beside a gemma3 one, InternVL beside a qwen2 / "
         "qwen3 one: enables --image and /image; Qwen2.5-Omni's audio tower beside its qwen2vl "
         "thinker: enables --audio and /audio)")
      ->check(CLI::ExistingFile);
  app.add_option("--image", a->images,
                 "PNG or JPEG image sent with the first message (repeatable; needs --mmproj)")
      ->check(CLI::ExistingFile);
  app.add_option("--audio", a->audios,
                 "WAV, FLAC or MP3 clip sent with the first message, after its pictures "
                 "(repeatable; needs an audio tower's --mmproj)")
      ->check(CLI::ExistingFile);
  app.add_option("--store-dir", a->store_dir,
                 "Disk tier of the chunk store (as kamera serve's): image embeddings kept there "
                 "are read back instead of running the vision tower again");
  return [a] { return run_chat(*a); };
}

}  // namespace kamera::cli
