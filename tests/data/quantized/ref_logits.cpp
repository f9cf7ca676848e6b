// llama.cpp's logits at every position of one batch, for the quantized fixtures (README.md).
// Not built by CMake: make_quantized.sh compiles it against a llama.cpp build's libllama.
//
//   ref_logits MODEL.gguf OUT.f32 TOK,TOK,... [one-by-one]
//
// CPU only, one thread, n_ctx = n_batch = n_ubatch = 512, KV cache in f32, flash attention off,
// the full-size SWA cache; every token in one llama_batch at positions 0..n-1 with logits on
// every row (with `one-by-one`: one llama_decode per token, in order); OUT gets n_tokens x
// n_vocab little-endian f32.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "llama.h"

static std::vector<llama_token> parse_tokens(const char* s) {
  std::vector<llama_token> ids;
  while (*s != '\0') {
    char* end = nullptr;
    ids.push_back(llama_token(std::strtol(s, &end, 10)));
    s = *end == ',' ? end + 1 : end;
  }
  return ids;
}

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 5 && std::strcmp(argv[4], "one-by-one") == 0)) {
    std::fprintf(stderr, "usage: %s MODEL.gguf OUT.f32 TOK,TOK,... [one-by-one]\n", argv[0]);
    return 2;
  }
  const std::vector<llama_token> ids = parse_tokens(argv[3]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.load_mode = LLAMA_LOAD_MODE_NONE;  // read, not mapped
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.swa_full = true;
  cp.n_threads = cp.n_threads_batch = 1;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const size_t step = argc == 5 ? 1 : ids.size();
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<float> logits;
  llama_batch batch = llama_batch_init(int32_t(step), 0, 1);
  for (size_t at = 0; at < ids.size(); at += step) {
    for (size_t i = 0; i < step; ++i) {
      batch.token[i] = ids[at + i];
      batch.pos[i] = llama_pos(at + i);
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    batch.n_tokens = int32_t(step);
    if (llama_decode(ctx, batch) != 0) return 1;
    for (size_t i = 0; i < step; ++i) {
      const float* row = llama_get_logits_ith(ctx, int32_t(i));
      logits.insert(logits.end(), row, row + n_vocab);
    }
  }
  FILE* out = std::fopen(argv[2], "wb");
  if (out == nullptr) return 1;
  std::fwrite(logits.data(), sizeof(float), logits.size(), out);
  std::fclose(out);
  std::fprintf(stderr, "%s: %zu x %d logits\n", argv[2], ids.size(), n_vocab);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
