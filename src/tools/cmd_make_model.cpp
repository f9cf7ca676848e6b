// kamera make-model: seeded random-weight GGUF files with real shapes.
#include <cstdio>

#include "synthetic/synthetic_model.h"
#include "tokenizer/hf_import.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct MakeModelArgs {
  std::string arch = "llama", preset, dims, out, type = "f32";
  std::string mla_layout = "split";  // deepseek2: split (llama.cpp's converter today) or kv_b
  std::string vocab, tokenizer_config, vocab_pre;  // a Hugging Face tokenizer to embed
  std::vector<std::string> control_tokens;         // into the synthetic vocabulary
  uint64_t seed = 1;
  bool json = false;
  bool reranker = false;
};

// The model's vocabulary size follows an imported vocabulary; --dims vocab=N (N larger) pads it
// with unused "[PAD<id>]" tokens, as llama.cpp's converter pads to a model's vocab_size.
Status fit_vocab(Tokenizer::Vocab& v, ModelConfig& c, bool vocab_in_dims) {
  const int n = int(v.pieces.size());
  if (!vocab_in_dims) c.n_vocab = n;
  if (c.n_vocab < n)
    return make_error(ErrorCode::InvalidArgument,
                      "--dims vocab={} is smaller than the {} tokens of --vocab", c.n_vocab, n);
  for (int i = n; i < c.n_vocab; ++i) {
    v.pieces.push_back(fmt::format("[PAD{}]", i));
    v.scores.push_back(0.0f);
    v.types.push_back(TokenType::Unused);
  }
  return Status::Ok();
}

int run_make_model(const MakeModelArgs& a) {
  if (a.arch.ends_with("-mmproj"))
    return run_make_mmproj(a.arch, a.preset, a.type, a.seed, a.out, a.json);
  const std::string preset = a.preset.empty() ? "tiny" : a.preset;
  const std::optional<Arch> arch = arch_from_name(a.arch);
  if (!arch)
    return fail(
        fmt::format("unknown --arch '{}' (architectures: {}, qwen2vl-mmproj, qwen25vl-mmproj, "
                    "qwen3vl-mmproj, kimivl-mmproj)",
                    a.arch, arch_names()),
        a.json);
  auto cfg = synthetic_preset(*arch, preset);
  if (!cfg)
    return fail(fmt::format("--arch {} has no preset '{}' (its presets: {})", a.arch, preset,
                            fmt::join(synthetic_preset_names(*arch), ", ")),
                a.json);
  if (!a.dims.empty()) {
    Status st = apply_dims(*cfg, a.dims);
    if (!st.ok()) return fail(st.message(), a.json);
  }
  if (a.mla_layout != "split" && a.mla_layout != "kv_b")
    return fail(fmt::format("--mla-layout '{}' (split or kv_b)", a.mla_layout), a.json);
  cfg->mla.file_layout = a.mla_layout == "kv_b" ? MlaFileLayout::KvB : MlaFileLayout::Split;
  auto type = dtype_from_name(a.type);
  if (!type) return fail(fmt::format("--type '{}' (f32, f16, bf16, q8_0)", a.type), a.json);
  SyntheticSpec spec;
  if (!a.vocab.empty()) {
    auto v = import_hf_tokenizer(a.vocab, a.tokenizer_config, a.vocab_pre);
    if (!v.ok()) return fail(v.message(), a.json);
    Status st = fit_vocab(*v, *cfg, a.dims.find("vocab=") != std::string::npos);
    if (!st.ok()) return fail(st.message(), a.json);
    spec.vocab = std::move(v.value());
  }
  spec.cfg = *cfg;
  spec.control_tokens = a.control_tokens;
  spec.reranker = a.reranker;
  spec.seed = a.seed;
  spec.weight_type = *type;
  spec.name = fmt::format("kamera-synthetic-{}-{}-seed{}", a.arch, preset, a.seed);
  for (const std::string& note : llama_cpp_incompatibilities(spec.cfg))
    std::fprintf(stderr, "kamera: note: kamera runs this file; llama.cpp differs: %s\n",
                 note.c_str());
  const double t0 = now_ms();
  Status st = write_synthetic_gguf(spec, a.out);
  if (!st.ok()) return fail(st.message(), a.json);
  const double ms = now_ms() - t0;
  const ModelConfig& c = spec.cfg;
  const int64_t params = count_parameters(c);
  if (a.json) {
    print_json(json{{"path", a.out},
                    {"arch", arch_name(c.arch)},
                    {"preset", preset},
                    {"seed", a.seed},
                    {"type", a.type},
                    {"params", params},
                    {"write_ms", ms}});
  } else {
    std::fprintf(stderr, "kamera: wrote %s (%s %s, %.1fM parameters, %s, seed %llu) in %.0f ms\n",
                 a.out.c_str(), arch_name(c.arch), preset.c_str(), params / 1e6, a.type.c_str(),
                 (unsigned long long)a.seed, ms);
  }
  return 0;
}

}  // namespace

Runner add_make_model(CLI::App& app) {
  auto a = std::make_shared<MakeModelArgs>();
  app.add_option("--arch", a->arch,
                 "Architecture: llama, qwen2, qwen2vl (M-RoPE), deepseek2 (MLA), qwen3, "
                 "qwen3moe (per-head q/k norms; top-k experts), qwen3vl, qwen3vlmoe (interleaved "
                 "M-RoPE, deepstack), smollm3 (NoPE layers), gemma3 (sliding-window and global "
                 "layers), phi3 (fused qkv and gate+up, partial rotary, LongRoPE), gpt-oss "
                 "(attention sinks, biases, MXFP4 experts, SWA/full alternation, YaRN) "
                 "decoders, or qwen2vl-mmproj, qwen25vl-mmproj, "
                 "qwen3vl-mmproj, kimivl-mmproj (vision towers in llama.cpp's mmproj layout)")
      ->capture_default_str();
  app.add_option(
      "--preset", a->preset,
      "Shape preset (default tiny): tiny (every architecture, for tests); 0.5b (llama, "
      "qwen2: Qwen2.5-0.5B's text decoder); 2b (Qwen2-VL-2B: qwen2vl decoder, "
      "qwen2vl-mmproj tower); 3b (Qwen2.5-VL-3B: qwen2vl decoder, qwen25vl-mmproj "
      "tower; qwen2: Qwen2.5-3B's text decoder); 7b (qwen2: Qwen2.5-7B's text decoder, "
      "its own output matrix); deepseek2: tiny-moe (tiny MLA with 1 dense and 2 MoE layers of 8 "
      "experts, 2 used, 1 shared, YaRN factor 4 over 256), lite (DeepSeek-V2-Lite as "
      "released: 27 layers, 1 dense, 64 experts of 1408, 6 used, 2 shared, YaRN 40 "
      "over 4096; 15.7 B weights), lite-attn (V2-Lite's attention with a dense FFN of "
      "1408), kimi-vl-tiny (tiny MLA with Kimi-VL's routing: sigmoid scores, the "
      "selection bias exp_probs_b, 8 experts, 2 used, 2 shared, normalized, x 2.446), "
      "kimi-vl-a3b (Kimi-VL-A3B's decoder: 27 layers, 64 experts of 1408, 6 used); "
      "kimivl-mmproj: tiny, a3b (Kimi-VL-A3B's MoonViT into 2048); qwen3: 0.6b "
      "(Qwen3-0.6B); qwen3moe: 30b-a3b-2l (Qwen3-30B-A3B's shapes, 2 of its 48 layers); "
      "qwen3vl: 2b (Qwen3-VL-2B's decoder), qwen3vl-mmproj: 2b (its tower), 30b-a3b "
      "(Qwen3-VL-30B-A3B's tower); qwen3vlmoe: 30b-a3b-3l (Qwen3-VL-30B-A3B's decoder, "
      "3 of its 48 layers); smollm3: 3b (SmolLM3-3B: no rope on every fourth layer); "
      "gemma3: 1b (Gemma-3-1B's text decoder: 5 sliding-window layers of 512 per "
      "global one); phi3: phi4-mini (Phi-4-mini-instruct's shapes: 32 layers, "
      "3072 wide, 24 heads of 128 with 96 rotated, 8 KV heads, LongRoPE over 4096 of "
      "131072; made-up factor values); gpt-oss: gpt-oss-20b (openai/gpt-oss-20b's shapes: 24 "
      "layers, 2880 wide, 64 heads and 8 KV heads of 64, 32 experts of 2880 with 4 "
      "used, vocabulary 201088, window 128 on every other layer, YaRN 32 over 4096 of "
      "131072; experts always MXFP4 as llama.cpp's converter writes them), gpt-oss-20b-2l (those "
      "shapes with 2 of the 24 layers, one sliding-window and one full)");
  app.add_option(
      "--dims", a->dims,
      "Overrides, e.g. dim=256,layers=4,heads=8,kv_heads=2,head_dim=32,ffn=512,vocab=1024,"
      "ctx=2048,rope_dims=16,theta=10000,eps=1e-5,bias=1,tied=0; qwen2vl, qwen3vl: "
      "sections=t:h:w; qwen3vl: deepstack (slices per image row); deepseek2 MLA: q_lora, "
      "kv_lora, qk_nope, qk_rope, v_head; MoE: experts, experts_used, shared_experts, "
      "expert_ffn, dense_lead (dense layers first), moe_norm (0/1: renormalize the top-k "
      "weights), moe_scale, sigmoid (0/1: sigmoid scores), sel_bias (0/1: the selection bias), "
      "groups, groups_used (group-limited top-k); YaRN: yarn (factor; 1 = off), yarn_orig "
      "(original context; default "
      "ctx / factor), yarn_log_mul (attention mscale 1 + yarn_log_mul * ln factor)");
  app.add_option("--type", a->type, "Weight dtype: f32, f16, bf16 or q8_0")->capture_default_str();
  app.add_option("--seed", a->seed, "Seed; the same seed gives the same file")
      ->capture_default_str();
  app.add_option("-o,--output", a->out, "Output .gguf path")->required();
  app.add_option("--vocab", a->vocab,
                 "Embed a Hugging Face byte-level BPE tokenizer (tokenizer.json); the model's "
                 "vocabulary size follows it")
      ->check(CLI::ExistingFile);
  app.add_option("--tokenizer-config", a->tokenizer_config,
                 "tokenizer_config.json for --vocab: special tokens, add_bos/add_eos, chat "
                 "template")
      ->check(CLI::ExistingFile);
  app.add_option("--vocab-pre", a->vocab_pre,
                 "Pre-tokenizer name to write (tokenizer.ggml.pre) instead of the one recognized "
                 "in --vocab");
  app.add_option("--control-tokens", a->control_tokens,
                 "Control tokens that replace the last pieces of the synthetic vocabulary "
                 "(comma-separated; for prompts with a real model's special tokens, e.g. "
                 "Kimi-VL's '<|media_start|>,<|media_content|>,<|media_end|>')")
      ->delimiter(',');
  app.add_option("--mla-layout", a->mla_layout,
                 "deepseek2: how the file writes MLA: split (llama.cpp's converter since its MLA "
                 "rework: one KV head, key/value_length_mla, attn_k_b and attn_v_b) or kv_b (the "
                 "layout before it: a KV head per query head, attn_kv_b)")
      ->capture_default_str();
  app.add_flag("--reranker", a->reranker,
               "qwen3: a Qwen3-Reranker as llama.cpp's converter writes it (pooling type rank, "
               "classifier labels yes/no, cls.output = the head's rows of \"yes\" and \"no\", "
               "the rerank prompt template; an untied head is dropped), for POST /v1/rerank");
  app.add_flag("--json", a->json, "Print a JSON summary");
  return [a] { return run_make_model(*a); };
}

}  // namespace kamera::cli
