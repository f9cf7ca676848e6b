/* Images through the public C API (kamera_chunk_from_image) on tiny random-weight Qwen2-VL files
 * (and Qwen3-VL's: deepstack rows, interleaved M-RoPE; and Kimi-VL's: MoonViT beside a deepseek2
 * decoder, linear positions, one picture per chunk; and the committed SmolVLM, Gemma 3, InternVL
 * and LLaVA-1.5 pairs of tests/data: one picture per chunk on linear positions),
 * against `kamera logits --mmproj --image` (the CLI's own decode, preprocess, encode and placement
 * path), compiled as C11 against kamera.h alone. Run by check_image_logits.py:
 *
 *   test_capi_image <decoder> <mmproj> <image> <reference file> <scratch directory>
 *
 * Checks: the image chunk evaluated after the prompt's text gives the CLI's next-token logits
 * within 1e-5 of their scale; the bytes path gives the same chunk id without a second encode; the
 * image relocated behind other chunks with a full-rank patch, and in a window, equals re-prefill;
 * video frames pair in time; bad images are errors; the embeddings written to a disk tier are read
 * back by a fresh vision handle and context without encoding, and a corrupted entry is a miss.
 * Exit status: the number of failed checks. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>

#include "capi_reference.h"

/* The window: [text][image] admitted at the back with full-rank patches, then queried. */
static void test_window(kamera_model* m, kamera_context* ctx, const reference* r,
                        kamera_chunk* img) {
  kamera_serve_options ref_o = kamera_serve_default_options();
  ref_o.policy = KAMERA_POLICY_REPREFILL;
  kamera_chunk* text = NULL;
  CHECK_OK(kamera_chunk_from_tokens(m, r->before, r->n_before, &text));
  kamera_window_policy wp = kamera_window_default_policy();
  wp.rank = KAMERA_FULL_RANK;
  kamera_window* w = NULL;
  kamera_chunk *after = NULL, *two[] = {text, img};
  kamera_logits *wq = NULL, *wref = assembled_logits(ctx, two, 2, &ref_o, r);
  CHECK_OK(kamera_chunk_from_tokens(m, r->after, r->n_after, &after));
  if (CHECK_OK(kamera_window_new(ctx, &wp, &w)) && CHECK_OK(kamera_window_admit_back(w, text)) &&
      CHECK_OK(kamera_window_admit_back(w, img)) &&
      CHECK_OK(kamera_window_query(w, after, KAMERA_LOGITS_LAST, &wq)) && wref) {
    const double d = capi_max_abs_diff(wref, wq);
    printf("image in a window: |d| %.3g to re-prefill\n", d);
    CHECK(d <= 1e-4 * scale_of(kamera_logits_data(wref), kamera_logits_n_vocab(wref)));
    CHECK_OK(kamera_window_evict(w, 0)); /* the image moves back by the text's extent */
    CHECK(kamera_window_n_slots(w) == 1);
    CHECK_OK(kamera_window_check(w));
  }
  kamera_logits_free(wq);
  kamera_logits_free(wref);
  kamera_window_free(w);
  kamera_chunk_free(text);
  kamera_chunk_free(after);
}

static void test_reuse(kamera_model* m, kamera_context* ctx, const reference* r,
                       kamera_chunk* img) {
  const int32_t pad_ids[] = {5, 9, 17, 3, 11, 30, 2};
  double d_patch = 0, d_blind = 0, s = 1;
  if (relocated_diffs(m, ctx, r, img, pad_ids, 7, &d_patch, &d_blind, &s)) {
    printf("relocated image: full-rank patch |d| %.3g, blind |d| %.3g (scale %.3g)\n", d_patch,
           d_blind, s);
    CHECK(d_patch <= 1e-4 * s);
    CHECK(d_blind > d_patch); /* the patch carries conditioning the canonical lacks */
  }
  test_window(m, ctx, r, img);
}

static void test_bad_images(kamera_context* ctx, kamera_vision* vision, const char* image,
                            const char* scratch) {
  kamera_chunk* c = (kamera_chunk*)1;
  char missing[4096];
  snprintf(missing, sizeof missing, "%s/no-such-image.png", scratch);
  const kamera_status st = kamera_chunk_from_image(ctx, vision, missing, &c);
  CHECK(st == KAMERA_ERR_IO || st == KAMERA_ERR_NOT_FOUND);
  CHECK(c == NULL && strstr(kamera_last_error(), "no-such-image.png") != NULL);
  const uint8_t junk[] = "this is not an image at all";
  CHECK(kamera_chunk_from_image_bytes(ctx, vision, junk, sizeof junk, &c) ==
        KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(c == NULL && strstr(kamera_last_error(), "kamera_chunk_from_image_bytes") != NULL);
  size_t n = 0;
  unsigned char* bytes = read_file(image, &n);
  CHECK(bytes != NULL && n > 64);
  if (bytes) { /* a truncated PNG: an error, never a partly decoded image */
    CHECK(kamera_chunk_from_image_bytes(ctx, vision, bytes, n / 2, &c) == KAMERA_ERR_CORRUPT_DATA);
    CHECK(c == NULL);
  }
  free(bytes);
  CHECK(kamera_chunk_from_image(ctx, NULL, image, &c) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(kamera_chunk_from_image(NULL, vision, image, &c) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(kamera_chunk_from_frames(ctx, vision, NULL, 2, &c) == KAMERA_ERR_INVALID_ARGUMENT);
  const char* two[] = {image, image};
  CHECK(kamera_chunk_from_frames_at(ctx, vision, two, 2, -1.0, &c) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(c == NULL && strstr(kamera_last_error(), "fps") != NULL);
  kamera_vision* v = NULL;
  CHECK(kamera_vision_load(image, &v) == KAMERA_ERR_CORRUPT_DATA); /* a PNG is not a GGUF */
  CHECK(v == NULL);
}

/* Flips one byte in the middle of every file under dir; returns how many. */
static int corrupt_files(const char* dir) {
  DIR* d = opendir(dir);
  int n = 0;
  for (struct dirent* e; d && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE* f = fopen(path, "r+b");
    if (!f) continue;
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    const int ch = fgetc(f);
    fseek(f, size / 2, SEEK_SET);
    fputc(ch ^ 0x5a, f);
    fclose(f);
    ++n;
  }
  if (d) closedir(d);
  return n;
}

static void test_store_tier(kamera_model* m, const char* mmproj, const char* image,
                            const char* scratch) {
  char dir[4096], image_dir[4200], a[KAMERA_ID_HEX_SIZE], b[KAMERA_ID_HEX_SIZE],
      c[KAMERA_ID_HEX_SIZE];
  snprintf(dir, sizeof dir, "%s/image-store", scratch); /* emptied by check_image_logits.py */
  snprintf(image_dir, sizeof image_dir, "%s/image", dir);
  kamera_vision_stats s1, s2, s3;
  media_via_store(m, mmproj, dir, image, kamera_chunk_from_image, a,
                  &s1); /* encodes, writes through to the disk tier */
  CHECK(s1.encodes == 1 && s1.store_hits == 0);
  media_via_store(m, mmproj, dir, image, kamera_chunk_from_image, b,
                  &s2); /* a "restart": new handle, new context */
  CHECK(s2.encodes == 0 && s2.store_hits == 1);
  CHECK(a[0] && strcmp(a, b) == 0); /* the id hashes every row and position: bit-identical */
  CHECK(corrupt_files(image_dir) == 1);
  media_via_store(m, mmproj, dir, image, kamera_chunk_from_image, c,
                  &s3); /* a corrupt entry is a miss: encoded again */
  CHECK(s3.encodes == 1 && s3.store_hits == 0);
  CHECK(strcmp(a, c) == 0);
  printf("image embeddings via a disk tier: encodes %lld, %lld, %lld (after corruption)\n",
         (long long)s1.encodes, (long long)s2.encodes, (long long)s3.encodes);
}

/* Video: 3 frames pair into 2 temporal slices (the last repeated), t advancing per pair; a
 * Qwen3-VL pair refuses it by name (its video is pairs with timestamps between). */
static void test_video(kamera_model* m, kamera_context* ctx, kamera_vision* vision,
                       const char* image, kamera_chunk* img) {
  const char* paths[] = {image, image, image};
  kamera_chunk* video = NULL;
  kamera_model_info info;
  CHECK_OK(kamera_model_get_info(m, &info));
  const int kimi = strcmp(info.arch, "deepseek2") == 0;
  const int qwen2vl = strncmp(info.arch, "qwen2vl", 7) == 0;
  const int qwen3vl = strncmp(info.arch, "qwen3vl", 7) == 0;
  if (!kimi && !qwen2vl && !qwen3vl) { /* SmolVLM, Gemma 3, InternVL, LLaVA: one picture */
    CHECK(kamera_chunk_from_frames(ctx, vision, paths, 3, &video) == KAMERA_ERR_INVALID_ARGUMENT);
    CHECK(video == NULL && strstr(kamera_last_error(), "one picture") != NULL);
    CHECK_OK(kamera_chunk_from_frames(ctx, vision, paths, 1, &video)); /* one: the image */
    CHECK(kamera_chunk_n_tokens(video) == kamera_chunk_n_tokens(img));
    CHECK(kamera_chunk_extent(img) == kamera_chunk_n_tokens(img)); /* linear positions */
  } else if (kimi) { /* a Kimi-VL tower: one picture per chunk, refused by name beyond */
    CHECK(kamera_chunk_from_frames(ctx, vision, paths, 3, &video) == KAMERA_ERR_UNSUPPORTED);
    CHECK(video == NULL && strstr(kamera_last_error(), "Kimi-VL") != NULL);
    CHECK_OK(kamera_chunk_from_frames(ctx, vision, paths, 1, &video)); /* one: the image */
    CHECK(kamera_chunk_n_tokens(video) == kamera_chunk_n_tokens(img));
    CHECK(kamera_chunk_extent(img) == kamera_chunk_n_tokens(img)); /* linear positions */
  } else if (qwen3vl) {
    CHECK(kamera_chunk_from_frames(ctx, vision, paths, 3, &video) == KAMERA_ERR_UNSUPPORTED);
    CHECK(strstr(kamera_last_error(), "Qwen3-VL") != NULL);
    CHECK_OK(kamera_chunk_from_frames(ctx, vision, paths, 2, &video)); /* one pair: an image */
    CHECK(kamera_chunk_n_tokens(video) == kamera_chunk_n_tokens(img));
  } else if (CHECK_OK(kamera_chunk_from_frames(ctx, vision, paths, 3, &video)))
    CHECK(kamera_chunk_n_tokens(video) == 2 * kamera_chunk_n_tokens(img));
  /* the rate: a Qwen2-VL tower keeps t = pair index, so the same chunk */
  kamera_chunk* at1 = NULL;
  if (qwen2vl && CHECK_OK(kamera_chunk_from_frames_at(ctx, vision, paths, 3, 1.0, &at1))) {
    char a[KAMERA_ID_HEX_SIZE], b[KAMERA_ID_HEX_SIZE];
    CHECK_OK(kamera_chunk_id(video, a));
    CHECK_OK(kamera_chunk_id(at1, b));
    CHECK(strcmp(a, b) == 0); /* the tower here is Qwen2-VL's (check_image_logits.py) */
  }
  kamera_chunk_free(at1);
  kamera_chunk_free(video);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s <decoder> <mmproj> <image> <reference> <scratch>\n", argv[0]);
    return 2;
  }
  const char *image = argv[3], *scratch = argv[5];
  media_pair p;
  if (!open_pair(argv[1], argv[2], argv[4], &p)) return capi_failures ? capi_failures : 2;
  kamera_model_info mi;
  CHECK_OK(kamera_model_get_info(p.m, &mi));
  /* a Qwen3-VL decoder's rows carry a slice per deepstack layer after the row itself */
  CHECK(strncmp(mi.arch, "qwen3vl", 7) == 0 ? mi.input_dim > mi.dim : mi.input_dim == mi.dim);

  kamera_chunk* img = NULL;
  if (CHECK_OK(kamera_chunk_from_image(p.ctx, p.vision, image, &img))) {
    check_matches_cli(p.ctx, p.vision, &p.r, image, img, kamera_chunk_from_image_bytes,
                      "image chunk via the C API vs kamera logits --image");
    test_reuse(p.m, p.ctx, &p.r, img);
    test_video(p.m, p.ctx, p.vision, image, img);
  }
  test_bad_images(p.ctx, p.vision, image, scratch);
  test_store_tier(p.m, argv[2], image, scratch);
  kamera_chunk_free(img);
  return close_pair(&p);
}
