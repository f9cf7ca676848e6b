// Dumps llama.cpp's view of an image prompt on a decoder + mmproj pair, through libmtmd (the
// reference of tests/data/idefics3/README.md; built against llama.cpp d32676d, not by kamera's
// build):
//   mtmd_dump DECODER MMPROJ IMAGE PROMPT OUT_PREFIX [causal]
// PROMPT holds mtmd's marker <__media__> where the image goes. Writes OUT_PREFIX.json (the chunks:
// text tokens, or an image chunk's row count and its offset in OUT_PREFIX_embd.f32) and
// OUT_PREFIX_embd.f32 (every image chunk's rows, f32 little-endian, in prompt order), and
// OUT_PREFIX_logits.f32: the decoder's logits at the last row of the whole prompt, decoded chunk by
// chunk at positions 0..n-1 (KV cache f32, flash attention off, one thread). With `causal`, an
// image chunk's rows are decoded in one batch with causal attention on, where mtmd's helper turns
// it off for the towers whose rows see each other (gemma3: tests/data/gemma3/README.md).
// IMAGE may be an audio file (mtmd reads WAV, MP3, FLAC by their bytes); its chunk is written as
// an "image" chunk too. MTMD_DUMP_CTX (default 512) sets n_ctx, for prompts of more positions
// (a 30-s audio window is 750 rows: tests/data/qwen25o/README.md).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

static void write_f32(const std::string& path, const std::vector<float>& v) {
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(v.data(), sizeof(float), v.size(), f);
  std::fclose(f);
}

int main(int argc, char** argv) {
  if (argc != 6 && !(argc == 7 && std::strcmp(argv[6], "causal") == 0)) {
    std::fprintf(stderr, "usage: %s DECODER MMPROJ IMAGE PROMPT OUT_PREFIX [causal]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[5];
  const bool causal = argc == 7;
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
  if (const char* n = std::getenv("MTMD_DUMP_CTX")) cp.n_ctx = uint32_t(std::atoi(n));
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* lctx = llama_init_from_model(model, cp);
  mtmd_context_params vp = mtmd_context_params_default();
  vp.use_gpu = false;
  vp.n_threads = 1;
  vp.warmup = false;
  vp.print_timings = false;
  vp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  mtmd_context* mctx = mtmd_init_from_file(argv[2], model, vp);
  if (!mctx) return 1;
  mtmd_bitmap* bmp = mtmd_helper_bitmap_init_from_file(mctx, argv[3], false).bitmap;
  if (!bmp) return 1;
  mtmd_input_text text{argv[4], std::strlen(argv[4]), /*add_special=*/false,
                       /*parse_special=*/true};
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  const mtmd_bitmap* bmps[1] = {bmp};
  if (mtmd_tokenize(mctx, chunks, &text, bmps, 1) != 0) return 1;
  const int n_embd = llama_model_n_embd(model);
  std::vector<float> embd;
  FILE* js = std::fopen((out + ".json").c_str(), "w");
  std::fprintf(js, "{\"n_embd\": %d, \"chunks\": [\n", n_embd);
  llama_pos n_past = 0;
  for (size_t i = 0; i < mtmd_input_chunks_size(chunks); ++i) {
    const mtmd_input_chunk* c = mtmd_input_chunks_get(chunks, i);
    const bool last = i + 1 == mtmd_input_chunks_size(chunks);
    if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t n = 0;
      const llama_token* t = mtmd_input_chunk_get_tokens_text(c, &n);
      std::fprintf(js, "  {\"text\": [");
      for (size_t k = 0; k < n; ++k) std::fprintf(js, "%s%d", k ? ", " : "", t[k]);
      std::fprintf(js, "]}%s\n", last ? "" : ",");
    } else {
      const size_t n = mtmd_input_chunk_get_n_tokens(c);
      if (mtmd_encode_chunk(mctx, c) != 0) return 1;
      const float* e = mtmd_get_output_embd(mctx);
      std::fprintf(js, "  {\"image\": %zu, \"offset\": %zu}%s\n", n, embd.size() / n_embd,
                   last ? "" : ",");
      embd.insert(embd.end(), e, e + n * n_embd);
    }
    if (causal && mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_IMAGE) {
      // the image rows decoded causally (mtmd's helper turns causal attention off for gemma3)
      const int n = int(mtmd_input_chunk_get_n_tokens(c));
      llama_batch b = llama_batch_init(n, n_embd, 1);
      std::memcpy(b.embd, embd.data() + embd.size() - size_t(n) * n_embd,
                  sizeof(float) * size_t(n) * n_embd);
      for (int k = 0; k < n; ++k) {
        b.pos[k] = n_past + k;
        b.n_seq_id[k] = 1;
        b.seq_id[k][0] = 0;
        b.logits[k] = 0;
      }
      b.n_tokens = n;
      if (llama_decode(lctx, b) != 0) return 1;
      llama_batch_free(b);
      n_past += n;
      continue;
    }
    llama_pos new_past = n_past;  // the helper adds the chunk to it
    if (mtmd_helper_eval_chunk_single(mctx, lctx, c, n_past, 0, 512, true, &new_past) != 0)
      return 1;
    n_past = new_past;
  }
  std::fprintf(js, "], \"n_pos\": %d}\n", n_past);
  std::fclose(js);
  write_f32(out + "_embd.f32", embd);
  const float* lg = llama_get_logits_ith(lctx, -1);
  write_f32(out + "_logits.f32",
            std::vector<float>(lg, lg + llama_vocab_n_tokens(llama_model_get_vocab(model))));
  mtmd_input_chunks_free(chunks);
  mtmd_bitmap_free(bmp);
  mtmd_free(mctx);
  llama_free(lctx);
  llama_model_free(model);
  return 0;
}
