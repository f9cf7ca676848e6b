// What llama.cpp's mtmd reference dumps share (tests/data/idefics3/mtmd_dump.cpp, one medium;
// tests/data/qwen25o/mtmd_omni_dump.cpp, several): the decoder and libmtmd context as every
// reference of tests/data is made (CPU, one thread, KV cache f32, flash attention off, batches of
// 512, n_ctx from MTMD_DUMP_CTX), the media files and the prompt's chunks, the JSON's text chunks
// and the f32 files. Included by them, built against llama.cpp d32676d, not by kamera's build.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

namespace mtmd_dump {

inline void write_f32(const std::string& path, const float* v, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(v, sizeof(float), n, f);
  std::fclose(f);
}

// The decoder, its context, the mmproj's mtmd context, the media and the prompt's chunks.
struct Run {
  llama_model* model = nullptr;
  llama_context* lctx = nullptr;
  mtmd_context* mctx = nullptr;
  std::vector<mtmd_bitmap*> media;
  mtmd_input_chunks* chunks = nullptr;

  Run() = default;
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  ~Run() {
    if (chunks) mtmd_input_chunks_free(chunks);
    for (mtmd_bitmap* b : media) mtmd_bitmap_free(b);
    if (mctx) mtmd_free(mctx);
    if (lctx) llama_free(lctx);
    if (model) llama_model_free(model);
  }
};

inline bool load_pair(Run& r, const char* decoder, const char* mmproj, uint32_t n_ctx) {
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  r.model = llama_model_load_from_file(decoder, mp);
  if (!r.model) return false;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_ctx;
  if (const char* n = std::getenv("MTMD_DUMP_CTX")) cp.n_ctx = uint32_t(std::atoi(n));
  cp.n_batch = cp.n_ubatch = 512;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  r.lctx = llama_init_from_model(r.model, cp);
  mtmd_context_params vp = mtmd_context_params_default();
  vp.use_gpu = false;
  vp.n_threads = 1;
  vp.warmup = false;
  vp.print_timings = false;
  vp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  r.mctx = mtmd_init_from_file(mmproj, r.model, vp);
  return r.mctx != nullptr;
}

// Loads the pair (n_ctx unless MTMD_DUMP_CTX says otherwise) and the media files (mtmd reads
// pictures and WAV, MP3, FLAC clips by their bytes), and chunks `prompt`, whose markers
// <__media__> take the media in order; false on any failure.
inline bool open(Run& r, const char* decoder, const char* mmproj, uint32_t n_ctx,
                 const std::vector<const char*>& media, const char* prompt) {
  if (!load_pair(r, decoder, mmproj, n_ctx)) return false;
  for (const char* path : media) {
    mtmd_bitmap* b = mtmd_helper_bitmap_init_from_file(r.mctx, path, false).bitmap;
    if (!b) return false;
    r.media.push_back(b);
  }
  mtmd_input_text text{prompt, std::strlen(prompt), /*add_special=*/false,
                       /*parse_special=*/true};
  r.chunks = mtmd_input_chunks_init();
  std::vector<const mtmd_bitmap*> bmps(r.media.begin(), r.media.end());
  return mtmd_tokenize(r.mctx, r.chunks, &text, bmps.data(), bmps.size()) == 0;
}

// Decodes chunk c at *n_past through mtmd's helper (batches of 512, logits of the last row) and
// moves *n_past past it; false when the decode fails.
inline bool eval_chunk(Run& r, const mtmd_input_chunk* c, llama_pos* n_past) {
  llama_pos new_past = *n_past;  // the helper adds the chunk to it
  if (mtmd_helper_eval_chunk_single(r.mctx, r.lctx, c, *n_past, 0, 512, true, &new_past) != 0)
    return false;
  *n_past = new_past;
  return true;
}

// OUT.json's chunks, in order, and their decode: a text chunk is {"text": [ids]}, a media chunk
// what media(c, n_past) writes; then decode(c, &n_past) (eval_chunk, for most). `{"n_embd": n,
// "chunks": [...], "n_pos": n_past}`; false where media or decode fails.
inline bool dump_chunks(Run& r, const std::string& out,
                        const std::function<bool(const mtmd_input_chunk*, llama_pos, FILE*)>& media,
                        const std::function<bool(const mtmd_input_chunk*, llama_pos*)>& decode) {
  FILE* js = std::fopen((out + ".json").c_str(), "w");
  std::fprintf(js, "{\"n_embd\": %d, \"chunks\": [\n", llama_model_n_embd(r.model));
  llama_pos n_past = 0;
  const size_t n_chunks = mtmd_input_chunks_size(r.chunks);
  for (size_t i = 0; i < n_chunks; ++i) {
    const mtmd_input_chunk* c = mtmd_input_chunks_get(r.chunks, i);
    if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t n = 0;
      const llama_token* t = mtmd_input_chunk_get_tokens_text(c, &n);
      std::fprintf(js, "  {\"text\": [");
      for (size_t k = 0; k < n; ++k) std::fprintf(js, "%s%d", k ? ", " : "", t[k]);
      std::fprintf(js, "]}");
    } else if (!media(c, n_past, js)) {
      return false;
    }
    std::fprintf(js, "%s\n", i + 1 == n_chunks ? "" : ",");
    if (!decode(c, &n_past)) return false;
  }
  std::fprintf(js, "], \"n_pos\": %d}\n", n_past);
  std::fclose(js);
  return true;
}

// OUT_embd.f32 (every media chunk's rows) and OUT_logits.f32 (the logits of the last row decoded).
inline void write_rows_and_logits(const Run& r, const std::string& out,
                                  const std::vector<float>& embd) {
  write_f32(out + "_embd.f32", embd.data(), embd.size());
  const float* lg = llama_get_logits_ith(r.lctx, -1);
  write_f32(out + "_logits.f32", lg, size_t(llama_vocab_n_tokens(llama_model_get_vocab(r.model))));
}

}  // namespace mtmd_dump
