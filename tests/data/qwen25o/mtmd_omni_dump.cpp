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
#include <string>
#include <vector>

#include "../mtmd_dump_common.h"

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
  mtmd_dump::Run r;
  const std::vector<const char*> media(argv + 5, argv + argc);
  if (!mtmd_dump::open(r, argv[1], argv[2], 2048, media, argv[3])) return 1;
  const int n_embd = llama_model_n_embd(r.model);
  std::vector<float> embd;
  auto media_rows = [&](const mtmd_input_chunk* c, llama_pos n_past, FILE* js) {
    return media_chunk(r.mctx, c, n_past, n_embd, embd, js);
  };
  auto decode = [&](const mtmd_input_chunk* c, llama_pos* n_past) {
    return mtmd_dump::eval_chunk(r, c, n_past);
  };
  if (!mtmd_dump::dump_chunks(r, out, media_rows, decode)) return 1;
  mtmd_dump::write_rows_and_logits(r, out, embd);
  return 0;
}
