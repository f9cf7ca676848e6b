// Helpers shared by the kamera subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "context/context.h"
#include "core/clock.h"
#include "core/status.h"
#include "model/model.h"
#include "reuse/chunk.h"

namespace kamera {
struct ServerOptions;
}

namespace kamera::cli {

using json = nlohmann::json;

// Every subcommand registers its options on `app` and returns the function that runs it.
using Runner = std::function<int()>;
Runner add_generate(CLI::App& app);
Runner add_logits(CLI::App& app);
Runner add_make_model(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_reuse_bench(CLI::App& app);
Runner add_window_bench(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_route(CLI::App& app);
Runner add_eval(CLI::App& app);
Runner add_report(CLI::App& app);
Runner add_demo(CLI::App& app);
Runner add_tokenize(CLI::App& app);
Runner add_detokenize(CLI::App& app);
Runner add_quant_bench(CLI::App& app);
Runner add_chat(CLI::App& app);
Runner add_info(CLI::App& app);
Runner add_vision_embed(CLI::App& app);
Runner add_vlm_bench(CLI::App& app);

// make-model's vision towers (cmd_make_mmproj.cpp): arch qwen2vl-mmproj or qwen25vl-mmproj.
int run_make_mmproj(const std::string& arch, const std::string& preset, const std::string& type,
                    uint64_t seed, const std::string& out, bool as_json);

// --mmproj / --image / --audio (vl_cli.cpp): images and audio clips in a prompt at its <image>
// and <audio> markers.
struct VlArgs {
  std::string mmproj;
  std::vector<std::string> images, audios;
  bool active() const { return !mmproj.empty() || !images.empty() || !audios.empty(); }
};
void add_vl_options(CLI::App& app, VlArgs& a);
// The prompt's pieces: text token runs and encoded images and clips (vision/media_prompt.h).
// kinds (optional): "image" or "audio" for each media piece, in order.
Result<std::vector<ChunkContent>> vl_pieces(const VlArgs& a, const Model& decoder,
                                            const std::string& prompt, int threads,
                                            std::vector<const char*>* kinds = nullptr);

// serve's --mmproj, --allow-local-media and image limits (serve_media_cli.cpp).
void add_serve_media_options(CLI::App& app, ServerOptions& o);

int default_threads();

// Blocks until SIGINT or SIGTERM (kamera serve, kamera route).
void wait_for_stop_signal();

// Prints an error (as {"error": ...} on stdout too when json) and returns exit code 1.
int fail(const std::string& message, bool as_json);

// Prints an error with its code ({"error": ..., "code": "not_found"} on stdout too when json).
int fail(const Error& error, bool as_json);

Result<std::shared_ptr<const Model>> load_for_cli(const std::string& path,
                                                  const std::string& tokenizer);

// A context on `model` with room for `kv_tokens` tokens in its KV pool.
Result<std::unique_ptr<Context>> context_for(std::shared_ptr<const Model> model, int threads,
                                             int64_t kv_tokens);

// --kv-type and --swa-full (cli_kv_type.cpp) on the subcommands that build a Context, and their
// values.
void add_kv_type_option(CLI::App& app);
DType kv_type_option();
bool swa_full_option();

// --rope-context (cli_rope_context.cpp) on the subcommands that load a model, and its value
// (read by load_for_cli into LoadOptions::n_ctx).
void add_rope_context_option(CLI::App& app);
int64_t rope_context_option();

// --numerics kamera|ggml (cli_numerics.cpp) on the same subcommands, and its value (read by
// load_for_cli into LoadOptions::numerics).
void add_numerics_option(CLI::App& app);
Numerics numerics_option();

// The -m/--model, -t/--threads and --json options every subcommand shares.
void add_model_option(CLI::App& app, std::string& model);
void add_threads_option(CLI::App& app, int& threads);

// "1,2,3" -> ids
Result<std::vector<int32_t>> parse_token_list(const std::string& s);

json model_summary(const Model& m);

// CPU features, ISA level, BLAS path and the kernel path of every weight type (and, given a
// model, of each weight type it holds): `kamera info --json`, and the "system" block of every
// bench --json.
json system_info(const Model* m);

// Prints one JSON document on stdout; invalid UTF-8 (e.g. a lone byte token) becomes U+FFFD.
void print_json(const json& j, int indent = -1);

}  // namespace kamera::cli
