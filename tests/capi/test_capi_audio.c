/* Audio clips through the public C API (kamera_chunk_from_audio) on the committed tiny
 * Qwen2.5-Omni pair (tests/data/qwen25o: the audio half of a two-half mmproj beside a qwen2vl
 * thinker), against `kamera logits --mmproj --audio` (the CLI's own decode, 16 kHz, log-mel,
 * encode and placement path), compiled as C11 against kamera.h alone. Run by
 * check_audio_logits.py:
 *
 *   test_capi_audio <decoder> <mmproj> <clip> <reference> <scratch> <picture mmproj> <picture>
 *
 * Checks: the clip chunk evaluated after the prompt's text gives the CLI's next-token logits
 * within 1e-5 of their scale; the bytes path gives the same chunk id without a second encode; the
 * clip relocated behind other chunks with a full-rank patch equals re-prefill within 1e-4 of the
 * scale, where blind reuse does not; bad audio and a picture tower are errors that name the
 * problem, and the Omni tower's vision half takes a picture; a disk tier gives the rows back to a
 * new handle and context. Exit status: the number of failed checks. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>

#include "capi_reference.h"

/* [pad][text][clip] under re-prefill, a full-rank patch and blind reuse: |d| to re-prefill. */
static void test_relocated(kamera_model* m, kamera_context* ctx, const reference* r,
                           kamera_chunk* clip) {
  const int32_t pad_ids[] = {5, 9, 17, 3, 11, 30, 2, 40, 41};
  double d_patch = 0, d_blind = 0, s = 1;
  if (relocated_diffs(m, ctx, r, clip, pad_ids, 9, &d_patch, &d_blind, &s)) {
    printf(
        "relocated clip: full-rank patch |d| %.3g (%.2e of the scale), blind |d| %.3g "
        "(%.2e of the scale), scale %.3g\n",
        d_patch, d_patch / s, d_blind, d_blind / s, s);
    CHECK(d_patch <= 1e-4 * s);
    CHECK(d_blind > 1e-4 * s); /* the antecedent changes the clip's KV: blind reuse misses it */
  }
}

static void test_refusals(kamera_model* m, kamera_context* ctx, kamera_vision* vision,
                          const char* clip, const char* scratch, const char* picture_mmproj,
                          const char* picture) {
  kamera_chunk* c = (kamera_chunk*)1;
  char missing[4096];
  snprintf(missing, sizeof missing, "%s/no-such-clip.wav", scratch);
  CHECK(kamera_chunk_from_audio(ctx, vision, missing, &c) == KAMERA_ERR_NOT_FOUND);
  CHECK(c == NULL && strstr(kamera_last_error(), "no-such-clip.wav") != NULL);
  const uint8_t junk[] = "this is not an audio file at all";
  CHECK(kamera_chunk_from_audio_bytes(ctx, vision, junk, sizeof junk, &c) ==
        KAMERA_ERR_UNSUPPORTED);
  CHECK(c == NULL && strstr(kamera_last_error(), "not a WAV, FLAC or MP3 file") != NULL);
  size_t n = 0;
  unsigned char* bytes = read_file(clip, &n);
  CHECK(bytes != NULL && n > 64);
  if (bytes) { /* the data chunk cut short: an error, never a clip cut short */
    CHECK(kamera_chunk_from_audio_bytes(ctx, vision, bytes, n / 2, &c) == KAMERA_ERR_CORRUPT_DATA);
    CHECK(c == NULL && strstr(kamera_last_error(), "truncated") != NULL);
  }
  CHECK(kamera_chunk_from_audio(NULL, vision, clip, &c) == KAMERA_ERR_INVALID_ARGUMENT);
  /* a picture to the Omni tower: its vision half (a Qwen2.5-VL tower) encodes it */
  if (CHECK_OK(kamera_chunk_from_image(ctx, vision, picture, &c))) CHECK(c != NULL);
  kamera_chunk_free(c);
  c = NULL;
  /* audio to a picture tower (LLaVA-1.5's), by name */
  kamera_vision* pictures = NULL;
  if (CHECK_OK(kamera_vision_load(picture_mmproj, &pictures))) {
    CHECK(kamera_chunk_from_audio(ctx, pictures, clip, &c) == KAMERA_ERR_INVALID_ARGUMENT);
    CHECK(c == NULL && strstr(kamera_last_error(), "picture tower") != NULL);
  }
  kamera_vision_free(pictures);
  (void)m;
  free(bytes);
}

static void test_store_tier(kamera_model* m, const char* mmproj, const char* clip,
                            const char* scratch) {
  char dir[4096], a[KAMERA_ID_HEX_SIZE], b[KAMERA_ID_HEX_SIZE];
  snprintf(dir, sizeof dir, "%s/audio-store", scratch); /* emptied by check_audio_logits.py */
  kamera_vision_stats s1, s2;
  media_via_store(m, mmproj, dir, clip, kamera_chunk_from_audio, a,
                  &s1); /* encodes, writes through to the disk tier */
  media_via_store(m, mmproj, dir, clip, kamera_chunk_from_audio, b,
                  &s2); /* a "restart": new handle, new context */
  printf("clip rows via a disk tier: encodes %lld then %lld (store hits %lld)\n",
         (long long)s1.encodes, (long long)s2.encodes, (long long)s2.store_hits);
  CHECK(s1.encodes == 1 && s1.store_hits == 0);
  CHECK(s2.encodes == 0 && s2.store_hits == 1);
  CHECK(a[0] && strcmp(a, b) == 0);
}

/* The clip chunk after the prompt's text against the CLI; the bytes path is the same chunk. */
static void test_matches_cli(kamera_context* ctx, kamera_vision* vision, const reference* r,
                             const char* clip, kamera_chunk* c) {
  check_matches_cli(ctx, vision, r, clip, c, kamera_chunk_from_audio_bytes,
                    "clip chunk via the C API vs kamera logits --audio");
  CHECK(kamera_chunk_n_tokens(c) == 750 && kamera_chunk_extent(c) == 750); /* (i, i, i) */
}

int main(int argc, char** argv) {
  if (argc != 8) {
    fprintf(stderr,
            "usage: %s <decoder> <mmproj> <clip> <reference> <scratch> <picture mmproj> "
            "<picture>\n",
            argv[0]);
    return 2;
  }
  const char *clip = argv[3], *scratch = argv[5];
  media_pair p;
  if (!open_pair(argv[1], argv[2], argv[4], &p)) return capi_failures ? capi_failures : 2;
  kamera_chunk* c = NULL;
  if (CHECK_OK(kamera_chunk_from_audio(p.ctx, p.vision, clip, &c))) {
    test_matches_cli(p.ctx, p.vision, &p.r, clip, c);
    test_relocated(p.m, p.ctx, &p.r, c);
  }
  test_refusals(p.m, p.ctx, p.vision, clip, scratch, argv[6], argv[7]);
  test_store_tier(p.m, argv[2], clip, scratch);
  kamera_chunk_free(c);
  return close_pair(&p);
}
