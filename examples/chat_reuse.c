/* A 3-turn chat through libkamera with automatic reuse: each turn's whole conversation is
 * rendered with the chat template and evaluated with kamera_prompt_eval, which serves what the
 * context has seen (as `kamera serve` serves a request). Turn 2 finds turn 1's prompt and reply as
 * an exact prefix; turn 3 slides the window (drops turn 1) and finds the survivors' KV from the
 * context they were computed in. Each turn prints where every run of its prompt came from.
 *
 *   kamera make-model --arch llama --preset tiny -o /tmp/tiny.gguf
 *   build/bin/kamera_example_chat_reuse /tmp/tiny.gguf
 */
#include <kamera.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 4096
#define REPLY_TOKENS 12

static const char* source_name(kamera_segment_source s) {
  switch (s) {
    case KAMERA_SOURCE_PREFIX:
      return "prefix";
    case KAMERA_SOURCE_CONTEXT_EXACT:
      return "context-exact";
    case KAMERA_SOURCE_CONTEXT_NEAREST:
      return "context-nearest";
    case KAMERA_SOURCE_PATCH_EXACT:
      return "patch-exact";
    case KAMERA_SOURCE_PATCH_NEAREST:
      return "patch-nearest";
    case KAMERA_SOURCE_KEEP:
      return "keep";
    case KAMERA_SOURCE_RECOMPUTED:
      return "recomputed";
    default:
      return "other";
  }
}

static int check(kamera_status st, const char* what) {
  if (st == KAMERA_OK) return 0;
  fprintf(stderr, "%s: %s (%s)\n", what, kamera_status_name(st), kamera_last_error());
  exit(1);
}

static int argmax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

/* One turn: the conversation in, the reply (greedy, REPLY_TOKENS at most) out in `reply`. */
static void turn(int number, kamera_model* model, kamera_context* ctx,
                 const kamera_chat_message* msgs, int n_msgs, char* reply, size_t reply_cap) {
  static int32_t ids[MAX_TOKENS];
  int32_t n = 0, out[REPLY_TOKENS];
  check(kamera_chat_tokenize(model, "chatml", msgs, n_msgs, 1, ids, MAX_TOKENS, &n),
        "kamera_chat_tokenize");
  kamera_seq* seq = NULL;
  kamera_logits* logits = NULL;
  check(kamera_prompt_eval(ctx, ids, n, KAMERA_REUSE_PATCH, &seq, &logits), "kamera_prompt_eval");
  kamera_serve_report rep;
  check(kamera_seq_get_report(seq, &rep), "kamera_seq_get_report");
  printf("turn %d: prompt %d tokens, %lld served without a forward, %lld prefilled\n", number, n,
         (long long)(n - rep.tokens_computed), (long long)rep.tokens_computed);
  for (int32_t i = 0; i < rep.n_segments; ++i) {
    kamera_segment s;
    check(kamera_seq_get_segment(seq, i, &s), "kamera_seq_get_segment");
    printf("  segment %d: %s %d tokens at %d\n", i, source_name(s.source), s.n_tokens, s.position);
  }
  int32_t n_out = 0;
  for (; n_out < REPLY_TOKENS; ++n_out) {
    const int next = argmax(kamera_logits_data(logits), kamera_logits_n_vocab(logits));
    kamera_logits_free(logits);
    logits = NULL;
    out[n_out] = next;
    if (n_out + 1 < REPLY_TOKENS)
      check(kamera_seq_eval_tokens(seq, &out[n_out], 1, KAMERA_LOGITS_LAST, &logits),
            "kamera_seq_eval_tokens");
    else
      check(kamera_seq_eval_tokens(seq, &out[n_out], 1, KAMERA_LOGITS_NONE, NULL),
            "kamera_seq_eval_tokens");
  }
  kamera_logits_free(logits);
  check(kamera_seq_remember(seq), "kamera_seq_remember"); /* the reply too, for the next turn */
  size_t len = 0;
  check(kamera_detokenize(model, out, n_out, reply, reply_cap, &len), "kamera_detokenize");
  kamera_seq_free(seq);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  kamera_model* model = NULL;
  check(kamera_model_load(argv[1], NULL, &model), "kamera_model_load");
  kamera_context_params p = kamera_context_default_params();
  p.kv_tokens = 8192;
  kamera_context* ctx = NULL;
  check(kamera_context_new(model, &p, &ctx), "kamera_context_new");
  static char r1[4096], r2[4096], r3[4096];
  const char* sys = "You are a careful assistant who answers in one short sentence.";
  const char* u1 =
      "Here is a long note about the harbour: the boats leave at dawn and return at dusk.";
  const char* u2 =
      "Now a second note about the market: it opens at nine and closes early on Sundays.";
  const char* u3 = "Which of the two notes mentions Sundays?";
  kamera_chat_message t1[] = {{"system", sys}, {"user", u1}};
  turn(1, model, ctx, t1, 2, r1, sizeof r1);
  kamera_chat_message t2[] = {{"system", sys}, {"user", u1}, {"assistant", r1}, {"user", u2}};
  turn(2, model, ctx, t2, 4, r2, sizeof r2);
  /* the window slides: turn 1's exchange is dropped, the rest is kept */
  kamera_chat_message t3[] = {{"system", sys}, {"user", u2}, {"assistant", r2}, {"user", u3}};
  turn(3, model, ctx, t3, 4, r3, sizeof r3);
  kamera_context_free(ctx);
  kamera_model_free(model);
  return 0;
}
