/* The "done when" check in C, against kamera.h alone: load stories260K, cache a chunk,
 * reuse it at another position with a rank-m patch, and get the logits of `kamera reuse-bench`'s
 * patch arm. check_reuse_bench.py runs reuse-bench on one item and passes its per-item KLs:
 *
 *   test_capi_stories <model.gguf> <antecedent> <chunk> <query> <rank> <patch item_kl>
 *                     <blind item_kl>
 *
 * The item is the bench's: texts tokenized without BOS and without a space prefix; the sequence
 * is [BOS][A][B][Q]; KL(p_reprefill || p_arm) is averaged over Q's positions
 * (docs/METHOD.md). The two KLs must agree to 1e-6 relative. */
#include <stdlib.h>

#include "capi_check.h"

static kamera_chunk* text_chunk(kamera_model* m, const char* text) {
  int32_t n = 0;
  kamera_chunk* c = NULL;
  if (!CHECK_OK(kamera_tokenize(m, text, strlen(text), KAMERA_TOKENIZE_RAW, NULL, 0, &n)))
    return NULL;
  int32_t* ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  if (CHECK_OK(kamera_tokenize(m, text, strlen(text), KAMERA_TOKENIZE_RAW, ids, n, &n)))
    CHECK_OK(kamera_chunk_from_tokens(m, ids, n, &c));
  free(ids);
  return c;
}

/* The query's logits at every position behind [BOS][A][B] served by the policy. */
static kamera_logits* arm(kamera_context* ctx, kamera_chunk* a, kamera_chunk* b, kamera_chunk* q,
                          kamera_policy policy, int32_t rank) {
  kamera_serve_options o = kamera_serve_default_options();
  o.policy = policy;
  o.rank = rank;
  const kamera_chunk* chunks[2] = {a, b};
  kamera_seq* seq = NULL;
  kamera_logits* out = NULL;
  if (CHECK_OK(kamera_seq_assemble(ctx, chunks, 2, &o, &seq)))
    CHECK_OK(kamera_seq_eval_chunk(seq, q, KAMERA_LOGITS_ALL, &out));
  kamera_seq_free(seq);
  return out;
}

static void expect_close(const char* what, double got, double want) {
  const double rel = fabs(got - want) / (fabs(want) > 1e-30 ? fabs(want) : 1e-30);
  printf("%s: C API %.9e, reuse-bench %.9e, relative difference %.2e\n", what, got, want, rel);
  CHECK(rel <= 1e-6);
}

int main(int argc, char** argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: %s <model> <antecedent> <chunk> <query> <rank> <patch kl> <blind kl>\n",
            argv[0]);
    return 2;
  }
  const int32_t rank = atoi(argv[5]);
  kamera_model* m = NULL;
  kamera_context* ctx = NULL;
  if (!CHECK_OK(kamera_model_load(argv[1], NULL, &m))) return capi_failures;
  if (!CHECK_OK(kamera_context_new(m, NULL, &ctx))) return capi_failures;
  kamera_chunk *a = text_chunk(m, argv[2]), *b = text_chunk(m, argv[3]),
               *q = text_chunk(m, argv[4]);
  if (a && b && q) {
    /* B cached alone: its canonical KV(B | BOS), formed at position 1, served at 1 + |A|. */
    int32_t formed = 0;
    CHECK_OK(kamera_context_cache_chunk(ctx, b, &formed));
    CHECK(formed == 1);
    kamera_logits* ref = arm(ctx, a, b, q, KAMERA_POLICY_REPREFILL, 0);
    kamera_logits* patch = arm(ctx, a, b, q, KAMERA_POLICY_PATCH, rank);
    kamera_logits* blind = arm(ctx, a, b, q, KAMERA_POLICY_BLIND, 0);
    CHECK(kamera_logits_rows(ref) == kamera_chunk_n_tokens(q));
    if (ref && patch && blind) {
      expect_close("patch item_kl", capi_mean_kl(ref, patch), atof(argv[6]));
      expect_close("blind item_kl", capi_mean_kl(ref, blind), atof(argv[7]));
      CHECK(capi_mean_kl(ref, patch) < capi_mean_kl(ref, blind));
    }
    kamera_logits_free(ref);
    kamera_logits_free(patch);
    kamera_logits_free(blind);
  }
  kamera_chunk_free(a);
  kamera_chunk_free(b);
  kamera_chunk_free(q);
  kamera_context_free(ctx);
  kamera_model_free(m);
  printf("%s: %d failed checks\n", argv[0], capi_failures);
  return capi_failures > 255 ? 255 : capi_failures;
}
