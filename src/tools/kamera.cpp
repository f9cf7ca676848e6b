// kamera: position-free KV cache engine. Command-line entry point.
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <thread>

#include "core/log.h"
#include "tools/cli_common.h"

namespace kamera::cli {

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

namespace {
std::atomic<bool> g_stop{false};
void on_stop_signal(int) {
  g_stop = true;
}
}  // namespace

void wait_for_stop_signal() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

int fail(const std::string& message, bool as_json) {
  std::fprintf(stderr, "kamera: error: %s\n", message.c_str());
  if (as_json) print_json(json{{"error", message}});
  return 1;
}

int fail(const Error& error, bool as_json) {
  std::fprintf(stderr, "kamera: error: %s\n", error.message.c_str());
  if (as_json) print_json(json{{"error", error.message}, {"code", error_code_name(error.code)}});
  return 1;
}

Result<std::shared_ptr<const Model>> load_for_cli(const std::string& path,
                                                  const std::string& tokenizer) {
  LoadOptions opts;
  opts.tokenizer_path = tokenizer;
  opts.n_ctx = rope_context_option();
  opts.numerics = numerics_option();
  KAMERA_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model(path, opts));
  return std::shared_ptr<const Model>(std::move(m));
}

Result<std::unique_ptr<Context>> context_for(std::shared_ptr<const Model> model, int threads,
                                             int64_t kv_tokens) {
  ContextOptions o;
  o.n_threads = threads;
  o.kv_tokens = kv_tokens;
  o.kv_type = kv_type_option();
  o.swa_full = swa_full_option();
  return Context::create(std::move(model), o);
}

void add_model_option(CLI::App& app, std::string& model) {
  app.add_option("-m,--model", model, "Model file: .gguf, or a llama2.c checkpoint (.bin)")
      ->required()
      ->check(CLI::ExistingFile);
}

void add_threads_option(CLI::App& app, int& threads) {
  app.add_option("-t,--threads", threads, "Threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
}

Result<std::vector<int32_t>> parse_token_list(const std::string& s) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string item = s.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < INT32_MIN || v > INT32_MAX)
      return make_error(ErrorCode::InvalidArgument, "--tokens: '{}' is not an integer token id",
                        item);
    out.push_back(int32_t(v));
    i = j + 1;
  }
  if (out.empty()) return make_error(ErrorCode::InvalidArgument, "--tokens: empty list");
  return out;
}

void print_json(const json& j, int indent) {
  const std::string s = j.dump(indent, ' ', false, json::error_handler_t::replace);
  std::printf("%s\n", s.c_str());
}

json model_summary(const Model& m) {
  const ModelConfig& c = m.cfg;
  return json{{"path", m.source},
              {"format", m.format},
              {"arch", arch_name(c.arch)},
              {"n_vocab", c.n_vocab},
              {"dim", c.dim},
              {"n_layers", c.n_layers},
              {"n_heads", c.n_heads},
              {"n_kv_heads", c.n_kv_heads},
              {"head_dim", c.head_dim},
              {"ffn_dim", c.ffn_dim},
              {"ctx_len", c.ctx_len},
              {"rope_dims", c.rope.n_rot},
              {"rope_theta", c.rope.theta},
              {"rope_layout", c.rope.layout == RopeLayout::Neox ? "neox" : "normal"},
              {"numerics", numerics_name(m.numerics)},
              {"fingerprint", fmt::format("{:016x}{:016x}", m.fingerprint[0], m.fingerprint[1])}};
}

}  // namespace kamera::cli

int main(int argc, char** argv) {
  using namespace kamera::cli;
  kamera::log();  // every message to stderr; stdout carries only results
  spdlog::set_pattern("kamera: %l: %v");
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{
      "kamera: an inference engine whose KV cache is position-free.\n"
      "Chunks are prefilled once and reused at any position (exact RoPE relocation plus a\n"
      "low-rank conditioning patch). Models: GGUF (llama, qwen2, qwen2vl, deepseek2, qwen3,\n"
      "qwen3moe, qwen3vl, qwen3vlmoe, phi3, gpt-oss; weights run in their file's type: F32, F16, "
      "BF16, Q4_0 "
      "... "
      "Q8_0, Q2_K ... Q6_K,\n"
      "IQ4_NL, IQ4_XS, MXFP4)\n"
      "and llama2.c checkpoints (v0, v1) with a tokenizer.bin.\n"
      "The commands that load a model take --numerics ggml to round as llama.cpp's x86 CPU\n"
      "backend does (Q8_0 products, gemma3's GELU): llama.cpp's logits, at some speed cost.",
      "kamera"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kamera 0.1.0");
  std::map<CLI::App*, Runner> runners;
  auto reg = [&](const char* name, const char* help, Runner (*add)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    runners[sub] = add(*sub);
    static const std::set<std::string> with_context = {
        "generate",     "chat", "logits", "bench",     "reuse-bench",
        "window-bench", "eval", "demo",   "vlm-bench", "serve"};
    if (with_context.count(name)) add_kv_type_option(*sub);
    if (with_context.count(name) || std::string(name) == "info") {
      add_rope_context_option(*sub);
      add_numerics_option(*sub);
    }
  };
  reg("generate", "Generate text from a prompt (BOS first, as llama2.c does)", add_generate);
  reg("chat", "Multi-turn chat with the model's chat template; the conversation stays cached",
      add_chat);
  reg("logits", "Print the f32 logits of the last (or every) position, for cross-checks",
      add_logits);
  reg("make-model", "Write a seeded random-weight GGUF model (every architecture kamera runs)",
      add_make_model);
  reg("bench", "Measure prefill or decode speed against OpenBLAS on the same GEMM shapes",
      add_bench);
  reg("info", "CPU features, ISA level, BLAS path and the kernel path of every weight type",
      add_info);
  reg("quant-bench", "GFLOP/s of the quantized-weight matmul per type, shape and kernel path",
      add_quant_bench);
  reg("reuse-bench",
      "Score chunk reuse (blind, rank-m patch, deep-half patch, mask oracle) against re-prefill",
      add_reuse_bench);
  reg("window-bench", "Measure window operations (slide, reorder, recall) against re-prefill",
      add_window_bench);
  reg("eval",
      "Evaluation suite: patch ranks, the literature's baselines and the deficit's anatomy on "
      "every split, as JSON",
      add_eval);
  reg("report", "Markdown and SVG figures (gnuplot) from kamera eval results", add_report);
  reg("demo",
      "The agent demo: a sliding window over a frame stream on the mini vision-language model, "
      "kamera vs re-prefill",
      add_demo);
  reg("tokenize", "Text -> token ids with the model's vocabulary (SentencePiece or byte-level BPE)",
      add_tokenize);
  reg("detokenize", "Token ids -> text with the model's vocabulary", add_detokenize);
  reg("vision-embed",
      "A media tower's embeddings (llama.cpp mmproj): an image or video frames through a vision "
      "tower, an audio clip through Qwen2.5-Omni's audio tower",
      add_vision_embed);
  reg("vlm-bench",
      "Time to first token of a question about a video window: re-encode, cached embeddings, "
      "relocated + patched image chunks",
      add_vlm_bench);
  reg("serve", "OpenAI-compatible HTTP server with chunk and window APIs (chunks reused by id)",
      add_serve);
  reg("route",
      "OpenAI-compatible front for several kamera servers: each request goes to the server "
      "holding most of its prompt's segments",
      add_route);
  // llama-server's -md and -td (CLI11 names a short option by one letter): kamera serve's
  // --model-draft and --threads-draft.
  static char model_draft[] = "--model-draft", threads_draft[] = "--threads-draft";
  for (int i = 2; i < argc && std::string_view(argv[1]) == "serve"; ++i) {
    if (std::string_view(argv[i]) == "-md") argv[i] = model_draft;
    if (std::string_view(argv[i]) == "-td") argv[i] = threads_draft;
  }
  CLI11_PARSE(app, argc, argv);
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return 1;
}
