// Dumps llama.cpp's view of a prompt with several media (pictures and audio clips, in marker
// order) on a decoder + mmproj pair, through libmtmd: the reference of tests/data/qwen25o/README.md
// ("Pictures and clips in one prompt"); built against llama.cpp d32676d, not by kamera's build.
//   mtmd_omni_dump DECODER MMPROJ PROMPT OUT_PREFIX MEDIA...
// PROMPT holds one marker <__media__> per MEDIA file. Writes
//   OUT_PREFIX.json        the chunks in order: {"text": [ids]}, or a media chunk
//                          {"media": "image" | "audio", "rows": n, "offset": its first row in
//                          _embd.f32, "pos0": the position it starts at, "n_pos": how far it
//                          advances the position}; an image chunk also has "pos": [[t, h, w], ...]
//                          of every row as mtmd_image_tokens_get_decoder_pos gives them (h from
//                          .y, w from .x: the sections mtmd's helper writes them to); "n_pos" of
//                          the whole prompt at the end
//   OUT_PREFIX_embd.f32    every media chunk's rows (f32, n_embd wide, in prompt order)
//   OUT_PREFIX_logits.f32  the logits of the prompt's last row, every chunk decoded in order by
//                          mtmd_helper_eval_chunk_single (KV cache f32, flash attention off, one
//                          thread, n_ctx from MTMD_DUMP_CTX, default 2048)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

static void write_f32(const std::string& path, const float* v, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(v, sizeof(float), n, f);
  std::fclose(f);
}

// The JSON of one media chunk, its rows appended to embd.
static bool media_chunk(mtmd_context* mctx, const mtmd_input_chunk* c, llama_pos pos0, int n_embd,
                        std::vector<float>& embd, FILE* js) {
  const size_t n = mtmd_input_chunk_get_n_tokens(c);
  if (mtmd_encode_chunk(mctx, c) != 0) return false;
  const float* e = mtmd_get_output_embd(mctx);
  const bool image = mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_IMAGE;
  std::fprintf(js,
               "  {\"media\": \"%s\", \"rows\": %zu, \"offset\": %zu, \"pos0\": %d, \"n_pos\": %d",
               image ? "image" : "audio", n, embd.size() / size_t(n_embd), pos0,
               mtmd_input_chunk_get_n_pos(c));
  if (image) {
    const mtmd_image_tokens* it = mtmd_input_chunk_get_tokens_image(c);
    std::fprintf(js, ", \"pos\": [");
    for (size_t i = 0; i < n; ++i) {
      const mtmd_decoder_pos p = mtmd_image_tokens_get_decoder_pos(it, pos0, i);
      std::fprintf(js, "%s[%u, %u, %u]", i ? ", " : "", p.t, p.y, p.x);
    }
    std::fprintf(js, "]");
  }
  std::fprintf(js, "}");
  embd.insert(embd.end(), e, e + n * size_t(n_embd));
  return true;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s DECODER MMPROJ PROMPT OUT_PREFIX MEDIA...\n", argv[0]);
    return 2;
  }
  const std::string out = argv[4];
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 2048;
  if (const char* n = std::getenv("MTMD_DUMP_CTX")) cp.n_ctx = uint32_t(std::atoi(n));
  cp.n_batch = cp.n_ubatch = 512;
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
  std::vector<mtmd_bitmap*> bmps;
  for (int i = 5; i < argc; ++i) {
    mtmd_bitmap* b = mtmd_helper_bitmap_init_from_file(mctx, argv[i], false).bitmap;
    if (!b) return 1;
    bmps.push_back(b);
  }
  mtmd_input_text text{argv[3], std::strlen(argv[3]), /*add_special=*/false,
                       /*parse_special=*/true};
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  std::vector<const mtmd_bitmap*> cbmps(bmps.begin(), bmps.end());
  if (mtmd_tokenize(mctx, chunks, &text, cbmps.data(), cbmps.size()) != 0) return 1;
  const int n_embd = llama_model_n_embd(model);
  std::vector<float> embd;
  FILE* js = std::fopen((out + ".json").c_str(), "w");
  std::fprintf(js, "{\"n_embd\": %d, \"chunks\": [\n", n_embd);
  llama_pos n_past = 0;
  for (size_t i = 0; i < mtmd_input_chunks_size(chunks); ++i) {
    const mtmd_input_chunk* c = mtmd_input_chunks_get(chunks, i);
    if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t n = 0;
      const llama_token* t = mtmd_input_chunk_get_tokens_text(c, &n);
      std::fprintf(js, "  {\"text\": [");
      for (size_t k = 0; k < n; ++k) std::fprintf(js, "%s%d", k ? ", " : "", t[k]);
      std::fprintf(js, "]}");
    } else if (!media_chunk(mctx, c, n_past, n_embd, embd, js)) {
      return 1;
    }
    std::fprintf(js, "%s\n", i + 1 == mtmd_input_chunks_size(chunks) ? "" : ",");
    llama_pos new_past = n_past;
    if (mtmd_helper_eval_chunk_single(mctx, lctx, c, n_past, 0, 512, true, &new_past) != 0)
      return 1;
    n_past = new_past;
  }
  std::fprintf(js, "], \"n_pos\": %d}\n", n_past);
  std::fclose(js);
  write_f32(out + "_embd.f32", embd.data(), embd.size());
  const float* lg = llama_get_logits_ith(lctx, -1);
  write_f32(out + "_logits.f32", lg, size_t(llama_vocab_n_tokens(llama_model_get_vocab(model))));
  mtmd_input_chunks_free(chunks);
  for (mtmd_bitmap* b : bmps) mtmd_bitmap_free(b);
  mtmd_free(mctx);
  llama_free(lctx);
  llama_model_free(model);
  return 0;
}
