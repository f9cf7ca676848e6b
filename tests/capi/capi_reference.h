/* The reference a C test of a media chunk checks against (C11, kamera.h and capi_check.h only):
 * a file written by check_image_logits.py / check_audio_logits.py from `kamera logits --json`,
 * three lines: the token ids before the media chunk, those after it, and the CLI's next-token
 * logits; with the helpers that compare logits and read files. */
#ifndef KAMERA_CAPI_REFERENCE_H
#define KAMERA_CAPI_REFERENCE_H

#include <stdint.h>
#include <stdlib.h>

#include "capi_check.h"

enum { kMaxTokens = 256 };

typedef struct reference {
  int32_t before[kMaxTokens], after[kMaxTokens];
  int n_before, n_after;
  float* logits;
  int n_vocab;
} reference;

/* Reads one line of whitespace-separated numbers; returns how many. */
static int read_line_ints(FILE* f, int32_t* out, int cap) {
  char line[8192];
  if (!fgets(line, sizeof line, f)) return -1;
  int n = 0;
  for (char *p = line, *end; n < cap; p = end) {
    const long v = strtol(p, &end, 10);
    if (end == p) break;
    out[n++] = (int32_t)v;
  }
  return n;
}

static int read_reference(const char* path, reference* r) {
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  r->n_before = read_line_ints(f, r->before, kMaxTokens);
  r->n_after = read_line_ints(f, r->after, kMaxTokens);
  r->logits = malloc(sizeof(float) * 1 << 20);
  r->n_vocab = 0;
  float v;
  while (r->logits && r->n_vocab < (1 << 20) && fscanf(f, "%f", &v) == 1)
    r->logits[r->n_vocab++] = v;
  fclose(f);
  return r->n_before > 0 && r->n_after > 0 && r->n_vocab > 0;
}

static double scale_of(const float* x, int n) {
  double m = 1;
  for (int i = 0; i < n; ++i)
    if (fabs(x[i]) > m) m = fabs(x[i]);
  return m;
}

static double max_diff(const float* a, const float* b, int n) {
  double m = 0;
  for (int i = 0; i < n; ++i)
    if (!(fabs((double)a[i] - b[i]) <= m)) m = fabs((double)a[i] - b[i]);
  return m;
}

static unsigned char* read_file(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* b = malloc(*n ? *n : 1);
  if (b && fread(b, 1, *n, f) != *n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  return b;
}

/* Next-token logits of text + media chunk + text on a fresh sequence (one forward per piece). */
static kamera_logits* exact_logits(kamera_context* ctx, const reference* r, kamera_chunk* media) {
  kamera_seq* seq = NULL;
  kamera_logits* l = NULL;
  if (CHECK_OK(kamera_seq_new(ctx, &seq)) &&
      CHECK_OK(kamera_seq_eval_tokens(seq, r->before, r->n_before, KAMERA_LOGITS_NONE, NULL)) &&
      CHECK_OK(kamera_seq_eval_chunk(seq, media, KAMERA_LOGITS_NONE, NULL)))
    CHECK_OK(kamera_seq_eval_tokens(seq, r->after, r->n_after, KAMERA_LOGITS_LAST, &l));
  kamera_seq_free(seq);
  return l;
}

/* Chunks assembled under `options`, then the text after the media chunk evaluated. */
static kamera_logits* assembled_logits(kamera_context* ctx, kamera_chunk* const* chunks, int n,
                                       const kamera_serve_options* o, const reference* r) {
  kamera_seq* seq = NULL;
  kamera_logits* l = NULL;
  if (CHECK_OK(kamera_seq_assemble(ctx, (const kamera_chunk* const*)chunks, n, o, &seq)))
    CHECK_OK(kamera_seq_eval_tokens(seq, r->after, r->n_after, KAMERA_LOGITS_LAST, &l));
  kamera_seq_free(seq);
  return l;
}

/* The pair a test runs on: the reference, the decoder, the tower (whose rows are the decoder's
 * input width) and a context. */
typedef struct media_pair {
  reference r;
  kamera_model* m;
  kamera_vision* vision;
  kamera_context* ctx;
} media_pair;

/* Reads the reference file and loads the pair; 0 (after reporting) when any does not load. */
static int open_pair(const char* decoder, const char* mmproj, const char* reference_path,
                     media_pair* p) {
  memset(p, 0, sizeof *p);
  if (!read_reference(reference_path, &p->r)) {
    fprintf(stderr, "cannot read the reference %s\n", reference_path);
    return 0;
  }
  if (!CHECK_OK(kamera_model_load(decoder, NULL, &p->m)) ||
      !CHECK_OK(kamera_vision_load(mmproj, &p->vision)) ||
      !CHECK_OK(kamera_context_new(p->m, NULL, &p->ctx)))
    return 0;
  kamera_model_info mi;
  kamera_vision_info vi;
  CHECK_OK(kamera_model_get_info(p->m, &mi));
  CHECK_OK(kamera_vision_get_info(p->vision, &vi));
  CHECK(vi.out_dim == mi.input_dim && vi.image_size == 0 && mi.n_vocab == p->r.n_vocab);
  return 1;
}

/* Frees the pair; prints the number of failed checks and returns it (the exit status). */
static int close_pair(media_pair* p) {
  kamera_context_free(p->ctx);
  kamera_vision_free(p->vision);
  kamera_model_free(p->m);
  free(p->r.logits);
  printf("%d failed checks\n", capi_failures);
  return capi_failures;
}

/* kamera_chunk_from_image or kamera_chunk_from_audio. */
typedef kamera_status (*media_from_path)(kamera_context*, kamera_vision*, const char*,
                                         kamera_chunk**);

/* A fresh vision handle and context on the store directory: the media chunk's id and the
 * handle's tower runs and tier hits. */
static void media_via_store(kamera_model* m, const char* mmproj, const char* dir, const char* path,
                            media_from_path from, char id[KAMERA_ID_HEX_SIZE],
                            kamera_vision_stats* vs) {
  kamera_context_params p = kamera_context_default_params();
  p.disk_dir = dir;
  kamera_context* ctx = NULL;
  kamera_vision* v = NULL;
  kamera_chunk* c = NULL;
  id[0] = 0;
  memset(vs, 0, sizeof *vs);
  if (CHECK_OK(kamera_vision_load(mmproj, &v)) && CHECK_OK(kamera_context_new(m, &p, &ctx)) &&
      CHECK_OK(from(ctx, v, path, &c))) {
    CHECK_OK(kamera_chunk_id(c, id));
    CHECK_OK(kamera_vision_get_stats(v, vs));
  }
  kamera_chunk_free(c);
  kamera_context_free(ctx);
  kamera_vision_free(v);
}

/* kamera_chunk_from_image_bytes or kamera_chunk_from_audio_bytes. */
typedef kamera_status (*media_from_bytes)(kamera_context*, kamera_vision*, const uint8_t*, size_t,
                                          kamera_chunk**);

/* The media chunk c of the file at `path` after the prompt's text against the CLI's next-token
 * logits: max |d| within 1e-5 of their scale (printed after `what`); the file's bytes through
 * `from` give the same chunk id, and the handle encoded the media once (the bytes were a hit). */
static void check_matches_cli(kamera_context* ctx, kamera_vision* vision, const reference* r,
                              const char* path, kamera_chunk* c, media_from_bytes from,
                              const char* what) {
  kamera_logits* l = exact_logits(ctx, r, c);
  if (l) {
    const double d = max_diff(kamera_logits_data(l), r->logits, r->n_vocab);
    const double s = scale_of(r->logits, r->n_vocab);
    printf("%s: max |d| %.3g (scale %.3g)\n", what, d, s);
    CHECK(d <= 1e-5 * s);
  }
  kamera_logits_free(l);
  size_t n = 0;
  unsigned char* bytes = read_file(path, &n);
  kamera_chunk* again = NULL;
  if (CHECK_OK(from(ctx, vision, bytes, n, &again))) {
    char a[KAMERA_ID_HEX_SIZE], b[KAMERA_ID_HEX_SIZE];
    CHECK_OK(kamera_chunk_id(c, a));
    CHECK_OK(kamera_chunk_id(again, b));
    CHECK(strcmp(a, b) == 0);
  }
  free(bytes);
  kamera_chunk_free(again);
  kamera_vision_stats vs;
  CHECK_OK(kamera_vision_get_stats(vision, &vs));
  CHECK(vs.encodes == 1 && vs.hits == 1); /* the same media is encoded once */
}

/* [pad][text][media] assembled under re-prefill, with full-rank patches and by blind reuse, then
 * the text after the media: max |d| of the patched and of the blind next-token logits to
 * re-prefill's, and the scale of re-prefill's; 0 when any of the three did not run. */
static int relocated_diffs(kamera_model* m, kamera_context* ctx, const reference* r,
                           kamera_chunk* media, const int32_t* pad_ids, int n_pad, double* d_patch,
                           double* d_blind, double* scale) {
  kamera_chunk *pad = NULL, *text = NULL;
  CHECK_OK(kamera_chunk_from_tokens(m, pad_ids, n_pad, &pad));
  CHECK_OK(kamera_chunk_from_tokens(m, r->before, r->n_before, &text));
  kamera_chunk* chunks[] = {pad, text, media};
  kamera_serve_options ref_o = kamera_serve_default_options(), full = ref_o, blind = ref_o;
  ref_o.policy = KAMERA_POLICY_REPREFILL;
  full.rank = KAMERA_FULL_RANK;
  blind.policy = KAMERA_POLICY_BLIND;
  kamera_logits* ref = assembled_logits(ctx, chunks, 3, &ref_o, r);
  kamera_logits* patched = assembled_logits(ctx, chunks, 3, &full, r);
  kamera_logits* bl = assembled_logits(ctx, chunks, 3, &blind, r);
  const int ran = ref && patched && bl;
  if (ran) {
    *scale = scale_of(kamera_logits_data(ref), kamera_logits_n_vocab(ref));
    *d_patch = capi_max_abs_diff(ref, patched);
    *d_blind = capi_max_abs_diff(ref, bl);
  }
  kamera_logits_free(ref);
  kamera_logits_free(patched);
  kamera_logits_free(bl);
  kamera_chunk_free(pad);
  kamera_chunk_free(text);
  return ran;
}

#endif /* KAMERA_CAPI_REFERENCE_H */
