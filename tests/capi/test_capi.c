/* The public C API on the committed mini-VL (models/minivl: a qwen2vl decoder with a word
 * vocabulary, and its vision encoder), compiled as C11 against kamera.h alone.
 *
 *   test_capi <repository root> <scratch directory>
 *
 * Each check measures a property against an independent computation through the same API: the
 * re-prefill policy against one forward of the whole sequence, a full-rank patch against
 * re-prefill, a window's query against an assembled sequence, a fork against its parent, a disk
 * tier hit against the canonical it stored. Exit status: the number of failed checks. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "capi_check.h"

enum { kFrames = 3 };

static kamera_model* model;
static kamera_vision* vision;
static kamera_chunk* frames[kFrames];
static kamera_chunk* question;
static uint8_t frame_rgb[kFrames][32 * 32 * 3];

/* A frame of coloured cells (deterministic from f): different frames, different chunks. */
static void paint_frame(int f, uint8_t* rgb) {
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) {
      const int cell = (y / 8) * 4 + x / 8;
      const int on = (cell * 7 + f * 5) % 11 < 3;
      uint8_t* p = rgb + (y * 32 + x) * 3;
      p[0] = on ? (uint8_t)(60 * f + 40) : 0;
      p[1] = on ? (uint8_t)(200 - 50 * f) : 0;
      p[2] = on ? (uint8_t)(cell * 15) : 0;
    }
}

static void test_errors(const char* root) {
  kamera_model* m = (kamera_model*)1;
  CHECK(kamera_model_load(NULL, NULL, &m) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(m == NULL);
  CHECK(strstr(kamera_last_error(), "path") != NULL);
  char missing[4096];
  snprintf(missing, sizeof missing, "%s/models/minivl/no-such-file.gguf", root);
  const kamera_status st = kamera_model_load(missing, NULL, &m);
  CHECK(st == KAMERA_ERR_IO || st == KAMERA_ERR_NOT_FOUND);
  CHECK(strstr(kamera_last_error(), "no-such-file.gguf") != NULL);
  CHECK(strcmp(kamera_status_name(KAMERA_ERR_OUT_OF_MEMORY), "out_of_memory") == 0);
  CHECK(strcmp(kamera_status_name((kamera_status)99), "unknown") == 0);
  kamera_model_info info;
  CHECK(kamera_model_get_info(NULL, &info) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(kamera_context_new(NULL, NULL, NULL) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(kamera_seq_eval_tokens(NULL, NULL, 0, KAMERA_LOGITS_LAST, NULL) ==
        KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(kamera_window_evict(NULL, 0) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(kamera_chunk_n_tokens(NULL) == 0 && kamera_logits_data(NULL) == NULL);
  kamera_model_free(NULL);
  kamera_context_free(NULL);
  kamera_chunk_free(NULL);
  kamera_seq_free(NULL);
  kamera_window_free(NULL);
  kamera_logits_free(NULL);
  kamera_sampler_free(NULL);
  kamera_vision_free(NULL);
}

static void test_model_and_tokenizer(void) {
  kamera_model_info info;
  if (!CHECK_OK(kamera_model_get_info(model, &info))) return;
  CHECK(strcmp(info.arch, "qwen2vl") == 0 && strcmp(info.format, "gguf") == 0);
  CHECK(info.n_vocab == 64 && info.dim == 64 && info.input_dim == 64 && info.n_layers == 4 &&
        info.has_tokenizer);
  CHECK(info.n_kv_channels == 2);
  kamera_kv_channel k, v;
  CHECK_OK(kamera_model_kv_channel(model, 0, &k));
  CHECK_OK(kamera_model_kv_channel(model, 1, &v));
  CHECK(strcmp(k.name, "k") == 0 && k.rotated && k.width == info.n_kv_heads * info.head_dim);
  CHECK(strcmp(v.name, "v") == 0 && !v.rotated);
  CHECK(kamera_model_kv_channel(model, 2, &k) == KAMERA_ERR_INVALID_ARGUMENT);

  /* The mini-VL's vocabulary is whole words ("\u2581colour", ...): text of other words falls
   * to <unk>, one per character; ids 3.. are the question words. */
  const char* text = "ab c";
  int32_t n = 0, ids[64];
  CHECK_OK(kamera_tokenize(model, text, strlen(text), KAMERA_TOKENIZE_RAW, NULL, 0, &n));
  CHECK(n == 4);
  CHECK(kamera_tokenize(model, text, strlen(text), KAMERA_TOKENIZE_RAW, ids, 3, &n) ==
        KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(n == 4);
  CHECK_OK(kamera_tokenize(model, text, strlen(text), KAMERA_TOKENIZE_ADD_BOS, ids, 64, &n));
  CHECK(n == 6 && ids[0] == info.bos); /* BOS, the dummy space prefix, a, b, space, c */
  n = 7;
  for (int i = 0; i < n; ++i) ids[i] = 3 + i;
  char buf[256];
  size_t len = 0;
  CHECK_OK(kamera_detokenize(model, ids, n, NULL, 0, &len));
  CHECK(kamera_detokenize(model, ids, n, buf, len, &len) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK_OK(kamera_detokenize(model, ids, n, buf, sizeof buf, &len));
  CHECK(len == strlen(buf) && len > 14);
  int words = 0;
  for (size_t i = 0; i < len; ++i) words += buf[i] == ' ';
  CHECK(words == 7); /* each word piece prints as " word" */
  int32_t bad = 64;
  CHECK(kamera_detokenize(model, &bad, 1, buf, sizeof buf, &len) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(kamera_chunk_from_tokens(model, ids, n, &question) == KAMERA_OK);
}

static void test_chunks(void) {
  kamera_vision_info vi;
  if (!CHECK_OK(kamera_vision_get_info(vision, &vi))) return;
  CHECK(vi.image_size == 32 && vi.token_grid == 2 && vi.n_tokens == 4 && vi.out_dim == 64);
  for (int f = 0; f < kFrames; ++f) {
    paint_frame(f, frame_rgb[f]);
    CHECK_OK(kamera_vision_encode(vision, model, frame_rgb[f], sizeof frame_rgb[f], &frames[f]));
  }
  kamera_chunk* bad = NULL;
  CHECK(kamera_vision_encode(vision, model, frame_rgb[0], 10, &bad) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(bad == NULL);
  CHECK(kamera_chunk_n_tokens(frames[0]) == 4 && kamera_chunk_extent(frames[0]) == 2);
  /* Same content, same id; another frame, another id. */
  kamera_chunk* again = NULL;
  CHECK_OK(kamera_vision_encode(vision, model, frame_rgb[1], sizeof frame_rgb[1], &again));
  char a[KAMERA_ID_HEX_SIZE], b[KAMERA_ID_HEX_SIZE], c[KAMERA_ID_HEX_SIZE];
  CHECK_OK(kamera_chunk_id(frames[1], a));
  CHECK_OK(kamera_chunk_id(again, b));
  CHECK_OK(kamera_chunk_id(frames[2], c));
  CHECK(strlen(a) == 32 && strcmp(a, b) == 0 && strcmp(a, c) != 0);
  kamera_chunk_free(again);
  /* Embedding rows with a layout: a custom (t, h, w) grid. */
  float rows[2 * 64] = {0};
  kamera_pos layout[2] = {{0, 0, 0}, {0, 0, 5}};
  kamera_chunk* e = NULL;
  CHECK_OK(kamera_chunk_from_embeddings(model, rows, 2, 64, layout, &e));
  CHECK(kamera_chunk_extent(e) == 6);
  kamera_chunk_free(e);
  CHECK(kamera_chunk_from_embeddings(model, rows, 2, 63, NULL, &e) == KAMERA_ERR_INVALID_ARGUMENT);
  int32_t out_of_vocab = 64;
  CHECK(kamera_chunk_from_tokens(model, &out_of_vocab, 1, &e) == KAMERA_ERR_INVALID_ARGUMENT);
}

/* [<bos>][frames...][question] assembled under a policy, with the question's logits. */
static kamera_logits* serve(kamera_context* ctx, kamera_policy policy, int32_t rank,
                            kamera_serve_report* report) {
  kamera_serve_options o = kamera_serve_default_options();
  o.policy = policy;
  o.rank = rank;
  kamera_seq* seq = NULL;
  kamera_logits* out = NULL;
  if (CHECK_OK(kamera_seq_assemble(ctx, (const kamera_chunk* const*)frames, kFrames, &o, &seq))) {
    if (report) CHECK_OK(kamera_seq_get_report(seq, report));
    CHECK_OK(kamera_seq_eval_chunk(seq, question, KAMERA_LOGITS_ALL, &out));
  }
  kamera_seq_free(seq);
  return out;
}

static void test_assembly(kamera_context* ctx) {
  /* The reference: one sequence, <bos> then every frame and the question through the forward. */
  kamera_model_info info;
  CHECK_OK(kamera_model_get_info(model, &info));
  kamera_seq* seq = NULL;
  kamera_logits* direct = NULL;
  if (CHECK_OK(kamera_seq_new(ctx, &seq))) {
    CHECK_OK(kamera_seq_eval_tokens(seq, &info.bos, 1, KAMERA_LOGITS_NONE, NULL));
    for (int f = 0; f < kFrames; ++f)
      CHECK_OK(kamera_seq_eval_chunk(seq, frames[f], KAMERA_LOGITS_NONE, NULL));
    CHECK(kamera_seq_next_position(seq) == 1 + 2 * kFrames);
    CHECK_OK(kamera_seq_eval_chunk(seq, question, KAMERA_LOGITS_ALL, &direct));
    CHECK(kamera_seq_n_tokens(seq) == 1 + 4 * kFrames + 7);
  }
  kamera_seq_free(seq);
  kamera_serve_report rep;
  kamera_logits* reprefill = serve(ctx, KAMERA_POLICY_REPREFILL, 0, &rep);
  CHECK(rep.forwards == kFrames && rep.tokens_reused == 0);
  CHECK(kamera_logits_rows(reprefill) == 7 && kamera_logits_n_vocab(reprefill) == 64);
  CHECK(capi_max_abs_diff(direct, reprefill) == 0.0);

  kamera_logits* blind = serve(ctx, KAMERA_POLICY_BLIND, 0, &rep);
  CHECK(rep.tokens_reused == 4 * kFrames);
  kamera_logits* full = serve(ctx, KAMERA_POLICY_PATCH, KAMERA_FULL_RANK, &rep);
  CHECK(rep.forwards == 1); /* canonicals are cached: one conditioned forward forms the patches */
  kamera_logits* rank1 = serve(ctx, KAMERA_POLICY_PATCH, 1, NULL);
  const double kl_blind = capi_mean_kl(reprefill, blind), kl_full = capi_mean_kl(reprefill, full),
               kl_rank1 = capi_mean_kl(reprefill, rank1);
  printf("assembly: KL to re-prefill: blind %.3e, rank-1 patch %.3e, full-rank patch %.3e\n",
         kl_blind, kl_rank1, kl_full);
  CHECK(kl_blind > 1e-6);
  CHECK(kl_full < 1e-3 * kl_blind && kl_full < 1e-8);
  CHECK(kl_rank1 < kl_blind);
  kamera_logits_free(direct);
  kamera_logits_free(reprefill);
  kamera_logits_free(blind);
  kamera_logits_free(full);
  kamera_logits_free(rank1);
}

static void test_segments_and_store(kamera_context* ctx) {
  kamera_store_stats s0, s1;
  CHECK_OK(kamera_store_get_stats(ctx, &s0));
  kamera_serve_options o = kamera_serve_default_options();
  o.rank = 2;
  kamera_seq* a = NULL;
  kamera_seq* b = NULL;
  CHECK_OK(kamera_seq_assemble(ctx, (const kamera_chunk* const*)frames, kFrames, &o, &a));
  CHECK_OK(kamera_seq_assemble(ctx, (const kamera_chunk* const*)frames, kFrames, &o, &b));
  kamera_segment sa, sb;
  CHECK_OK(kamera_seq_get_segment(a, 0, &sa));
  CHECK(sa.source == KAMERA_SOURCE_CANONICAL && sa.first_token == 1 && sa.position == 1);
  CHECK_OK(kamera_seq_get_segment(a, 2, &sa));
  CHECK_OK(kamera_seq_get_segment(b, 2, &sb));
  CHECK(sa.source == KAMERA_SOURCE_PATCH_FORMED && sb.source == KAMERA_SOURCE_PATCH_HIT);
  CHECK(sa.first_token == 9 && sa.position == 5 && sa.n_tokens == 4);
  char id[KAMERA_ID_HEX_SIZE];
  CHECK_OK(kamera_chunk_id(frames[2], id));
  CHECK(strcmp(sa.id, id) == 0);
  CHECK(kamera_seq_get_segment(a, 3, &sa) == KAMERA_ERR_NOT_FOUND);
  CHECK_OK(kamera_store_get_stats(ctx, &s1));
  CHECK(s1.patch_entries == s0.patch_entries + 2 && s1.patch_hits >= s0.patch_hits + 2);
  CHECK(s1.canonical_bytes > 0 && s1.bytes_saved > s0.bytes_saved);
  /* A fork shares pages; evaluation on it leaves the parent unchanged. */
  kamera_seq* f = NULL;
  kamera_logits *la = NULL, *lf = NULL;
  if (CHECK_OK(kamera_seq_fork(a, &f))) {
    CHECK_OK(kamera_seq_eval_chunk(f, question, KAMERA_LOGITS_LAST, &lf));
    CHECK(kamera_seq_n_tokens(a) == 13 && kamera_seq_n_tokens(f) == 20);
    CHECK_OK(kamera_seq_eval_chunk(a, question, KAMERA_LOGITS_LAST, &la));
    CHECK(capi_max_abs_diff(la, lf) == 0.0);
  }
  kamera_logits_free(la);
  kamera_logits_free(lf);
  kamera_seq_free(f);
  kamera_seq_free(a);
  kamera_seq_free(b);
}

static void test_kv_view(kamera_context* ctx) {
  const float* data = NULL;
  int32_t rows = 0, cols = 0, formed = -1;
  kamera_chunk* c = NULL;
  CHECK_OK(kamera_vision_encode(vision, model, frame_rgb[0], sizeof frame_rgb[0], &c));
  CHECK(kamera_chunk_kv(c, 0, 0, &data, &rows, &cols) == KAMERA_ERR_NOT_FOUND);
  CHECK_OK(kamera_context_cache_chunk(ctx, c, &formed));
  CHECK(formed == 0); /* the assemblies above cached it */
  CHECK_OK(kamera_chunk_kv(c, 3, 1, &data, &rows, &cols));
  CHECK(data != NULL && rows == 4 && cols == 32);
  double norm = 0;
  for (int i = 0; i < rows * cols; ++i) norm += (double)data[i] * data[i];
  CHECK(norm > 0 && isfinite(norm));
  CHECK(kamera_chunk_kv(c, 4, 0, &data, &rows, &cols) == KAMERA_ERR_INVALID_ARGUMENT);
  kamera_chunk_free(c);
}

/* The window's query against a sequence assembled from the same chunks. */
static double window_vs_assembly(kamera_context* ctx, kamera_window* w, int first, int n) {
  kamera_serve_options o = kamera_serve_default_options();
  o.rank = 2;
  kamera_seq* seq = NULL;
  kamera_logits *lw = NULL, *ls = NULL;
  double d = INFINITY;
  if (CHECK_OK(kamera_window_query(w, question, KAMERA_LOGITS_ALL, &lw)) &&
      CHECK_OK(kamera_seq_assemble(ctx, (const kamera_chunk* const*)frames + first, n, &o, &seq)) &&
      CHECK_OK(kamera_seq_eval_chunk(seq, question, KAMERA_LOGITS_ALL, &ls)))
    d = capi_max_abs_diff(lw, ls);
  kamera_logits_free(lw);
  kamera_logits_free(ls);
  kamera_seq_free(seq);
  return d;
}

/* Admits the frames, slides, refreshes and recalls; returns the window (3 slots) or NULL. */
static kamera_window* window_slide_and_recall(kamera_context* ctx) {
  kamera_window_policy pol = kamera_window_default_policy();
  pol.rank = 2;
  kamera_window* w = NULL;
  if (!CHECK_OK(kamera_window_new(ctx, &pol, &w))) return NULL;
  for (int f = 0; f < kFrames; ++f) CHECK_OK(kamera_window_admit_back(w, frames[f]));
  CHECK(kamera_window_n_slots(w) == kFrames && kamera_window_next_position(w) == 7);
  const double d0 = window_vs_assembly(ctx, w, 0, kFrames);
  printf("window: query vs assembled sequence, max |logit diff| %.3g\n", d0);
  CHECK(d0 < 1e-4);
  kamera_window_slot before, after;
  CHECK_OK(kamera_window_get_slot(w, 2, &before));
  CHECK_OK(kamera_window_evict(w, 0));
  CHECK_OK(kamera_window_get_slot(w, 1, &after));
  CHECK(strcmp(before.id, after.id) == 0 && after.position == before.position - 2);
  CHECK(after.patched && after.conditioned);
  CHECK_OK(kamera_window_check(w));
  int32_t stale[4], n_stale = -1;
  CHECK_OK(kamera_window_stale_slots(w, stale, 4, &n_stale));
  CHECK(n_stale == 2 && stale[0] == 0 && stale[1] == 1);
  for (int i = 0; i < 2; ++i) CHECK_OK(kamera_window_refresh(w, i));
  CHECK_OK(kamera_window_stale_slots(w, NULL, 0, &n_stale));
  CHECK(n_stale == 0);
  CHECK(window_vs_assembly(ctx, w, 1, 2) < 1e-4);
  /* Recall the evicted frame at the front (fresh: exact, nothing before it). */
  char id0[KAMERA_ID_HEX_SIZE];
  CHECK_OK(kamera_chunk_id(frames[0], id0));
  CHECK(kamera_window_recall(w, "not-an-id", 0, KAMERA_RECALL_FRESH) ==
        KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(kamera_window_recall(w, "0123456789abcdef0123456789abcdef", 0, KAMERA_RECALL_FRESH) ==
        KAMERA_ERR_NOT_FOUND);
  CHECK_OK(kamera_window_recall(w, id0, 0, KAMERA_RECALL_FRESH));
  CHECK(kamera_window_n_slots(w) == 3);
  CHECK_OK(kamera_window_check(w));
  return w;
}

/* Reorders of a 3-slot window [f0, f1, f2]: exact, orbit, blind; then a stale recall. */
static void window_reorders(kamera_window* w) {
  const int32_t order[3] = {2, 1, 0}, bad[3] = {0, 0, 1}, swap[3] = {1, 0, 2};
  kamera_window_slot s;
  CHECK(kamera_window_reorder(w, bad, 3, KAMERA_REORDER_EXACT) == KAMERA_ERR_INVALID_ARGUMENT);
  CHECK_OK(kamera_window_reorder(w, order, 3, KAMERA_REORDER_EXACT));
  char id0[KAMERA_ID_HEX_SIZE];
  CHECK_OK(kamera_chunk_id(frames[0], id0));
  CHECK_OK(kamera_window_get_slot(w, 2, &s));
  CHECK(strcmp(s.id, id0) == 0 && s.position == 5 && s.patched);
  CHECK_OK(kamera_window_check(w));
  /* Orbit: one patch per chunk for any order of its antecedent set; blind: canonicals. */
  CHECK_OK(kamera_window_reorder(w, swap, 3, KAMERA_REORDER_ORBIT));
  CHECK_OK(kamera_window_get_slot(w, 2, &s));
  CHECK(s.orbit && s.patched);
  CHECK_OK(kamera_window_reorder(w, swap, 3, KAMERA_REORDER_BLIND));
  CHECK_OK(kamera_window_get_slot(w, 2, &s));
  CHECK(!s.patched && !s.conditioned);
  /* A stale recall brings back the patch the chunk carried when it was evicted. */
  CHECK_OK(kamera_window_reorder(w, swap, 3, KAMERA_REORDER_EXACT));
  char id2[KAMERA_ID_HEX_SIZE];
  CHECK_OK(kamera_window_get_slot(w, 2, &s));
  memcpy(id2, s.id, sizeof id2);
  CHECK_OK(kamera_window_evict(w, 2));
  CHECK_OK(kamera_window_recall(w, id2, 0, KAMERA_RECALL_STALE));
  CHECK_OK(kamera_window_get_slot(w, 0, &s));
  CHECK(strcmp(s.id, id2) == 0 && s.patched);
  int32_t n_stale = 0;
  CHECK_OK(kamera_window_stale_slots(w, NULL, 0, &n_stale));
  CHECK(n_stale >= 1); /* its conditioning no longer matches what is before it */
  CHECK_OK(kamera_window_check(w));
}

static void test_window(kamera_context* ctx) {
  kamera_window* w = window_slide_and_recall(ctx);
  if (!w) return;
  /* A fork answers like its parent, bit for bit (it shares the pages). */
  kamera_window* fork = NULL;
  kamera_logits *lw = NULL, *lf = NULL, *clean = NULL, *back = NULL;
  if (CHECK_OK(kamera_window_fork(w, &fork))) {
    CHECK_OK(kamera_window_query(w, question, KAMERA_LOGITS_LAST, &lw));
    CHECK_OK(kamera_window_query(fork, question, KAMERA_LOGITS_LAST, &lf));
    CHECK(capi_max_abs_diff(lw, lf) == 0.0);
    /* Clean view then recondition is exact and reversible. */
    CHECK_OK(kamera_window_clean_view(fork, 2));
    CHECK_OK(kamera_window_query(fork, question, KAMERA_LOGITS_LAST, &clean));
    CHECK_OK(kamera_window_recondition(fork, 2));
    CHECK_OK(kamera_window_query(fork, question, KAMERA_LOGITS_LAST, &back));
    CHECK(capi_max_abs_diff(lw, clean) > 0.0 && capi_max_abs_diff(lw, back) == 0.0);
    window_reorders(fork);
  }
  CHECK(kamera_window_evict(w, 7) == KAMERA_ERR_INVALID_ARGUMENT);
  kamera_logits_free(lw);
  kamera_logits_free(lf);
  kamera_logits_free(clean);
  kamera_logits_free(back);
  kamera_window_free(fork);
  kamera_window_free(w);
}

/* The repair budget of kamera_prompt_eval_budget: refused outside [0, 1] and above 0 with a
 * policy that has no repair (nothing handed out); 1 evaluates. On a context of its own (what it
 * evaluates stays in that context's caches). */
static void test_prompt_budget(void) {
  kamera_context* ctx = NULL;
  if (!CHECK_OK(kamera_context_new(model, NULL, &ctx))) return;
  kamera_model_info info;
  CHECK_OK(kamera_model_get_info(model, &info));
  const int32_t ids[] = {info.bos, 5, 6, 7, 8, 9};
  kamera_seq* seq = NULL;
  kamera_logits* l = NULL;
  CHECK(kamera_prompt_eval_budget(ctx, ids, 6, KAMERA_REUSE_PATCH, 1.5, &seq, &l) ==
        KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(seq == NULL && l == NULL && strstr(kamera_last_error(), "reuse_budget") != NULL);
  CHECK(kamera_prompt_eval_budget(ctx, ids, 6, KAMERA_REUSE_KEEP, 0.5, &seq, &l) ==
        KAMERA_ERR_INVALID_ARGUMENT);
  CHECK(seq == NULL && l == NULL && strstr(kamera_last_error(), "keep") != NULL);
  if (CHECK_OK(kamera_prompt_eval_budget(ctx, ids, 6, KAMERA_REUSE_PATCH, 1.0, &seq, &l)))
    CHECK(kamera_logits_n_vocab(l) == info.n_vocab);
  kamera_logits_free(l);
  kamera_seq_free(seq);
  kamera_context_free(ctx);
}

static void test_sampler(void) {
  float logits[6] = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 0.5f};
  kamera_sampler* greedy = NULL;
  int32_t t = -1;
  CHECK_OK(kamera_sampler_new(NULL, &greedy));
  CHECK_OK(kamera_sampler_sample(greedy, logits, 6, &t));
  CHECK(t == 1);
  kamera_sampler_params p = kamera_sampler_default_params();
  p.temperature = 1.0f;
  p.top_k = 2;
  p.seed = 42;
  kamera_sampler *a = NULL, *b = NULL;
  CHECK_OK(kamera_sampler_new(&p, &a));
  CHECK_OK(kamera_sampler_new(&p, &b));
  int counts[6] = {0}, same = 1;
  for (int i = 0; i < 400; ++i) {
    int32_t x = -1, y = -1;
    CHECK_OK(kamera_sampler_sample(a, logits, 6, &x));
    CHECK_OK(kamera_sampler_sample(b, logits, 6, &y));
    same = same && x == y;
    if (x >= 0 && x < 6) ++counts[x];
  }
  /* top-2 of {2.0, 1.9}: p(1) = 1 / (1 + e^-0.1) = 0.525; 400 draws, 4 sigma = 0.1. */
  CHECK(same && counts[1] + counts[3] == 400);
  CHECK(counts[1] > 0.425 * 400 && counts[1] < 0.625 * 400);
  p.top_p = 0.0f;
  kamera_sampler* bad = NULL;
  CHECK(kamera_sampler_new(&p, &bad) == KAMERA_ERR_INVALID_ARGUMENT && bad == NULL);
  kamera_sampler_free(greedy);
  kamera_sampler_free(a);
  kamera_sampler_free(b);
}

static void test_disk_tier(const char* scratch) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/capi-disk-tier", scratch);
  kamera_context_params p = kamera_context_default_params();
  p.disk_dir = dir;
  kamera_context *c1 = NULL, *c2 = NULL;
  kamera_chunk *x = NULL, *y = NULL;
  int32_t formed = -1;
  if (!CHECK_OK(kamera_context_new(model, &p, &c1))) return;
  CHECK_OK(kamera_vision_encode(vision, model, frame_rgb[2], sizeof frame_rgb[2], &x));
  CHECK_OK(kamera_vision_encode(vision, model, frame_rgb[2], sizeof frame_rgb[2], &y));
  CHECK_OK(kamera_context_cache_chunk(c1, x, NULL));
  kamera_context_free(c1); /* x keeps its canonical */
  if (CHECK_OK(kamera_context_new(model, &p, &c2))) {
    CHECK_OK(kamera_context_cache_chunk(c2, y, &formed));
    CHECK(formed == 0); /* served by the disk tier */
    kamera_store_stats s;
    kamera_tier_stats t;
    CHECK_OK(kamera_store_get_stats(c2, &s));
    CHECK_OK(kamera_store_get_tier_stats(c2, 0, &t));
    CHECK(s.n_tiers == 1 && s.tier_canonical_hits == 1 && strcmp(t.name, "disk") == 0);
    CHECK(t.hits >= 1 && kamera_store_get_tier_stats(c2, 1, &t) == KAMERA_ERR_NOT_FOUND);
    for (int l = 0; l < 4; ++l)
      for (int ch = 0; ch < 2; ++ch) {
        const float *dx = NULL, *dy = NULL;
        int32_t rx, cx, ry, cy;
        CHECK_OK(kamera_chunk_kv(x, l, ch, &dx, &rx, &cx));
        CHECK_OK(kamera_chunk_kv(y, l, ch, &dy, &ry, &cy));
        CHECK(rx == ry && cx == cy && dx && dy && memcmp(dx, dy, (size_t)rx * cx * 4) == 0);
      }
    CHECK_OK(kamera_store_set_budget(c2, 0));
    CHECK_OK(kamera_store_get_stats(c2, &s));
    CHECK(s.canonical_entries == 0 && s.canonical_bytes == 0 && s.byte_budget == 0);
  }
  kamera_chunk_free(x);
  kamera_chunk_free(y);
  kamera_context_free(c2);
}

static void test_full_pool(void) {
  kamera_context_params p = kamera_context_default_params();
  p.kv_tokens = 16; /* one page of 16 tokens plus the slack of two */
  kamera_context* ctx = NULL;
  if (!CHECK_OK(kamera_context_new(model, &p, &ctx))) return;
  kamera_pool_stats before, after;
  kamera_seq* seq = NULL;
  CHECK_OK(kamera_seq_new(ctx, &seq));
  int32_t ids[80];
  for (int i = 0; i < 80; ++i) ids[i] = 3 + i % 40;
  CHECK_OK(kamera_context_pool_stats(ctx, &before));
  kamera_logits* l = (kamera_logits*)1;
  CHECK(kamera_seq_eval_tokens(seq, ids, 80, KAMERA_LOGITS_LAST, &l) == KAMERA_ERR_OUT_OF_MEMORY);
  CHECK(l == NULL && kamera_seq_n_tokens(seq) == 0 && kamera_seq_next_position(seq) == 0);
  CHECK_OK(kamera_context_pool_stats(ctx, &after));
  CHECK(after.pages_used == before.pages_used && after.tokens == 0);
  CHECK_OK(kamera_seq_eval_tokens(seq, ids, 8, KAMERA_LOGITS_LAST, &l));
  kamera_context_free(ctx); /* the sequence and the logits keep it alive */
  kamera_logits* l2 = NULL;
  CHECK_OK(kamera_seq_eval_tokens(seq, ids + 8, 1, KAMERA_LOGITS_LAST, &l2));
  CHECK(kamera_seq_n_tokens(seq) == 9 && kamera_logits_rows(l2) == 1);
  kamera_seq_free(seq);
  CHECK(kamera_logits_n_vocab(l) == 64);
  kamera_logits_free(l);
  kamera_logits_free(l2);
}

/* One context per thread on the shared model: served logits as in a single thread. */
static void* serve_in_thread(void* out) {
  kamera_context* ctx = NULL;
  if (kamera_context_new(model, NULL, &ctx) == KAMERA_OK)
    *(kamera_logits**)out = serve(ctx, KAMERA_POLICY_PATCH, 2, NULL);
  kamera_context_free(ctx);
  return NULL;
}

static void test_threads(void) {
  kamera_logits* alone = NULL;
  serve_in_thread(&alone);
  kamera_logits* got[2] = {NULL, NULL};
  pthread_t th[2];
  for (int i = 0; i < 2; ++i) CHECK(pthread_create(&th[i], NULL, serve_in_thread, &got[i]) == 0);
  for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  CHECK(alone && capi_max_abs_diff(alone, got[0]) == 0.0 &&
        capi_max_abs_diff(alone, got[1]) == 0.0);
  kamera_logits_free(alone);
  kamera_logits_free(got[0]);
  kamera_logits_free(got[1]);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <repository root> <scratch directory>\n", argv[0]);
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/models/minivl/minivl.gguf", argv[1]);
  test_errors(argv[1]);
  if (!CHECK_OK(kamera_model_load(path, NULL, &model))) return capi_failures;
  snprintf(path, sizeof path, "%s/models/minivl/minivl-mmproj.gguf", argv[1]);
  if (!CHECK_OK(kamera_vision_load(path, &vision))) return capi_failures;
  test_model_and_tokenizer();
  test_chunks();
  kamera_context* ctx = NULL;
  if (question && frames[kFrames - 1] && CHECK_OK(kamera_context_new(model, NULL, &ctx))) {
    test_assembly(ctx);
    test_segments_and_store(ctx);
    test_kv_view(ctx);
    test_window(ctx);
    kamera_pool_stats ps;
    CHECK_OK(kamera_context_pool_stats(ctx, &ps));
    CHECK(ps.sequences == 0 && ps.pages_used == 0); /* every sequence was freed */
  }
  if (question && frames[kFrames - 1]) test_threads();
  test_sampler();
  test_disk_tier(argv[2]);
  test_full_pool();
  test_prompt_budget();
  kamera_context_free(ctx);
  for (int f = 0; f < kFrames; ++f) kamera_chunk_free(frames[f]);
  kamera_chunk_free(question);
  kamera_vision_free(vision);
  kamera_model_free(model);
  printf("%s: %d failed checks\n", argv[0], capi_failures);
  return capi_failures > 255 ? 255 : capi_failures;
}
