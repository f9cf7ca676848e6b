/* examples/reuse.c: cache a passage once, then reuse it behind another passage (at another
 * position) three ways: blind (its cached KV relocated), patched (plus a rank-8 correction for
 * what it would have seen), and re-prefilled (the exact reference). Prints how far each is from
 * the reference (next-token KL over the question) and what each continues with.
 *
 * Build against an installed kamera (cmake --install build --prefix /tmp/kamera):
 *   export PKG_CONFIG_PATH=/tmp/kamera/lib/pkgconfig
 *   cc -std=c11 -O2 reuse.c $(pkg-config --cflags --libs kamera) -lm -o reuse
 *   LD_LIBRARY_PATH=/tmp/kamera/lib ./reuse stories260K.gguf
 * In the build tree: build/bin/kamera_example_reuse stories260K.gguf
 */
#include <kamera.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                                             \
  do {                                                                        \
    kamera_status st_ = (call);                                               \
    if (st_ != KAMERA_OK) {                                                   \
      fprintf(stderr, "%s failed (%s): %s\n", #call, kamera_status_name(st_), \
              kamera_last_error());                                           \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

/* A chunk of text, tokenized as it is (no BOS, no extra space in front). */
static kamera_chunk* text_chunk(kamera_model* m, const char* text) {
  int32_t n = 0, ids[512];
  TRY(kamera_tokenize(m, text, strlen(text), KAMERA_TOKENIZE_RAW, ids, 512, &n));
  kamera_chunk* c = NULL;
  TRY(kamera_chunk_from_tokens(m, ids, n, &c));
  return c;
}

/* KL(p || q) of the softmaxes of two logit rows, in nats. */
static double kl(const float* p, const float* q, int n) {
  double pm = -INFINITY, qm = -INFINITY, ps = 0, qs = 0, s = 0;
  for (int i = 0; i < n; ++i) pm = fmax(pm, p[i]), qm = fmax(qm, q[i]);
  for (int i = 0; i < n; ++i) ps += exp(p[i] - pm), qs += exp(q[i] - qm);
  for (int i = 0; i < n; ++i) {
    const double lp = p[i] - pm - log(ps), lq = q[i] - qm - log(qs);
    s += exp(lp) * (lp - lq);
  }
  return s;
}

/* Serves [BOS][a][b] by the policy, runs the question, prints the KL to `ref` (when given) and
 * a greedy continuation; returns the question's logits (every position). */
static kamera_logits* serve(kamera_context* ctx, kamera_model* m, kamera_chunk* a, kamera_chunk* b,
                            kamera_chunk* q, kamera_policy policy, const kamera_logits* ref) {
  static const char* names[] = {"blind", "patch", "reprefill"};
  kamera_serve_options o = kamera_serve_default_options();
  o.policy = policy;
  o.rank = 8;
  const kamera_chunk* chunks[2] = {a, b};
  kamera_seq* seq = NULL;
  kamera_logits* logits = NULL;
  TRY(kamera_seq_assemble(ctx, chunks, 2, &o, &seq));
  TRY(kamera_seq_eval_chunk(seq, q, KAMERA_LOGITS_ALL, &logits));
  const int rows = kamera_logits_rows(logits), nv = kamera_logits_n_vocab(logits);
  double mean_kl = 0;
  for (int r = 0; ref && r < rows; ++r)
    mean_kl += kl(kamera_logits_data(ref) + r * nv, kamera_logits_data(logits) + r * nv, nv) / rows;
  /* Greedy continuation: 24 tokens from the question's last row. */
  kamera_sampler* greedy = NULL;
  TRY(kamera_sampler_new(NULL, &greedy));
  int32_t out[24];
  const float* last = kamera_logits_data(logits) + (rows - 1) * nv;
  kamera_logits* step = NULL;
  for (int i = 0; i < 24; ++i) {
    TRY(kamera_sampler_sample(greedy, last, nv, &out[i]));
    kamera_logits_free(step);
    TRY(kamera_seq_eval_tokens(seq, &out[i], 1, KAMERA_LOGITS_LAST, &step));
    last = kamera_logits_data(step);
  }
  char text[1024];
  size_t len = 0;
  TRY(kamera_detokenize(m, out, 24, text, sizeof text, &len));
  for (size_t i = 0; i < len; ++i)
    if (text[i] == '\n') text[i] = ' '; /* one line per policy */
  printf("%-9s KL to re-prefill %.3e | ...%s\n", names[policy], mean_kl, text);
  kamera_logits_free(step);
  kamera_sampler_free(greedy);
  kamera_seq_free(seq);
  return logits;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <model.gguf> [antecedent] [passage] [question]\n", argv[0]);
    return 2;
  }
  const char* a_text = argc > 2 ? argv[2] : " Lily had a red ball. She liked to play in the park.";
  const char* b_text = argc > 3 ? argv[3] : " One day, the ball rolled into the pond.";
  const char* q_text = argc > 4 ? argv[4] : " Lily was sad because";
  kamera_model* m = NULL;
  kamera_context* ctx = NULL;
  TRY(kamera_model_load(argv[1], NULL, &m));
  TRY(kamera_context_new(m, NULL, &ctx));
  kamera_chunk *a = text_chunk(m, a_text), *b = text_chunk(m, b_text), *q = text_chunk(m, q_text);

  /* The passage is cached once, alone: KV(passage | BOS), position-free. */
  int32_t formed = 0;
  TRY(kamera_context_cache_chunk(ctx, b, &formed));
  char id[KAMERA_ID_HEX_SIZE];
  TRY(kamera_chunk_id(b, id));
  printf("passage %s: %d tokens cached (%s)\n", id, kamera_chunk_n_tokens(b),
         formed ? "formed" : "found");

  kamera_logits* ref = serve(ctx, m, a, b, q, KAMERA_POLICY_REPREFILL, NULL);
  kamera_logits_free(serve(ctx, m, a, b, q, KAMERA_POLICY_BLIND, ref));
  kamera_logits_free(serve(ctx, m, a, b, q, KAMERA_POLICY_PATCH, ref));

  kamera_store_stats s;
  TRY(kamera_store_get_stats(ctx, &s));
  printf("store: %lld canonicals, %lld patches, %llu bytes\n", (long long)s.canonical_entries,
         (long long)s.patch_entries, (unsigned long long)(s.canonical_bytes + s.patch_bytes));
  kamera_logits_free(ref);
  kamera_chunk_free(a);
  kamera_chunk_free(b);
  kamera_chunk_free(q);
  kamera_context_free(ctx);
  kamera_model_free(m);
  return 0;
}
