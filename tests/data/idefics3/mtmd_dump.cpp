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
#include <cstring>
#include <string>
#include <vector>

#include "../mtmd_dump_common.h"

// The image rows just encoded (the last n of embd) decoded in one batch with causal attention on,
// at n_past.. (mtmd's helper turns it off for gemma3); false when the decode fails.
static bool decode_causal(mtmd_dump::Run& r, const std::vector<float>& embd, int n, int n_embd,
                          llama_pos* n_past) {
  llama_batch b = llama_batch_init(n, n_embd, 1);
  std::memcpy(b.embd, embd.data() + embd.size() - size_t(n) * n_embd,
              sizeof(float) * size_t(n) * n_embd);
  for (int k = 0; k < n; ++k) {
    b.pos[k] = *n_past + k;
    b.n_seq_id[k] = 1;
    b.seq_id[k][0] = 0;
    b.logits[k] = 0;
  }
  b.n_tokens = n;
  if (llama_decode(r.lctx, b) != 0) return false;
  llama_batch_free(b);
  *n_past += n;
  return true;
}

int main(int argc, char** argv) {
  if (argc != 6 && !(argc == 7 && std::strcmp(argv[6], "causal") == 0)) {
    std::fprintf(stderr, "usage: %s DECODER MMPROJ IMAGE PROMPT OUT_PREFIX [causal]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[5];
  const bool causal = argc == 7;
  mtmd_dump::Run r;
  if (!mtmd_dump::open(r, argv[1], argv[2], 512, {argv[3]}, argv[4])) return 1;
  const int n_embd = llama_model_n_embd(r.model);
  std::vector<float> embd;
  auto image = [&](const mtmd_input_chunk* c, llama_pos, FILE* js) {
    const size_t n = mtmd_input_chunk_get_n_tokens(c);
    if (mtmd_encode_chunk(r.mctx, c) != 0) return false;
    const float* e = mtmd_get_output_embd(r.mctx);
    std::fprintf(js, "  {\"image\": %zu, \"offset\": %zu}", n, embd.size() / n_embd);
    embd.insert(embd.end(), e, e + n * n_embd);
    return true;
  };
  auto decode = [&](const mtmd_input_chunk* c, llama_pos* n_past) {
    if (causal && mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_IMAGE)
      return decode_causal(r, embd, int(mtmd_input_chunk_get_n_tokens(c)), n_embd, n_past);
    return mtmd_dump::eval_chunk(r, c, n_past);
  };
  if (!mtmd_dump::dump_chunks(r, out, image, decode)) return 1;
  mtmd_dump::write_rows_and_logits(r, out, embd);
  return 0;
}
