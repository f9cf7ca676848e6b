/* A minimal check harness for the C tests of the public API (C11, this header and kamera.h
 * only). CHECK records a failure and goes on; the program's exit status is the failure count. */
#ifndef KAMERA_CAPI_CHECK_H
#define KAMERA_CAPI_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kamera.h"

static int capi_failures = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      ++capi_failures;                                                                         \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              kamera_last_error());                                                            \
    }                                                                                          \
  } while (0)

/* Checks that a call returns KAMERA_OK; evaluates to whether it did. */
#define CHECK_OK(call) capi_check_ok((call), #call, __FILE__, __LINE__)

static inline int capi_check_ok(kamera_status st, const char* what, const char* file, int line) {
  if (st == KAMERA_OK) return 1;
  ++capi_failures;
  fprintf(stderr, "%s:%d: %s returned %s: %s\n", file, line, what, kamera_status_name(st),
          kamera_last_error());
  return 0;
}

/* KL(p || q) in nats of softmax(p_logits) and softmax(q_logits), in double
 * (docs/METHOD.md: the next-token KL to re-prefill). */
static inline double capi_kl(const float* p_logits, const float* q_logits, int n) {
  double pm = -INFINITY, qm = -INFINITY, ps = 0, qs = 0, kl = 0;
  for (int i = 0; i < n; ++i) {
    if (p_logits[i] > pm) pm = p_logits[i];
    if (q_logits[i] > qm) qm = q_logits[i];
  }
  for (int i = 0; i < n; ++i) {
    ps += exp((double)p_logits[i] - pm);
    qs += exp((double)q_logits[i] - qm);
  }
  const double plz = pm + log(ps), qlz = qm + log(qs);
  for (int i = 0; i < n; ++i) {
    const double lp = (double)p_logits[i] - plz, lq = (double)q_logits[i] - qlz;
    kl += exp(lp) * (lp - lq);
  }
  return kl > 0 ? kl : 0;
}

/* Mean KL over the rows of two rows x n_vocab logit blocks. */
static inline double capi_mean_kl(const kamera_logits* ref, const kamera_logits* arm) {
  const int rows = kamera_logits_rows(ref), v = kamera_logits_n_vocab(ref);
  double s = 0;
  for (int r = 0; r < rows; ++r)
    s += capi_kl(kamera_logits_data(ref) + (size_t)r * v, kamera_logits_data(arm) + (size_t)r * v,
                 v);
  return rows ? s / rows : 0;
}

/* max |a - b| over two logit blocks of the same shape (INFINITY when the shapes differ). */
static inline double capi_max_abs_diff(const kamera_logits* a, const kamera_logits* b) {
  if (!a || !b || kamera_logits_rows(a) != kamera_logits_rows(b) ||
      kamera_logits_n_vocab(a) != kamera_logits_n_vocab(b))
    return INFINITY;
  const size_t n = (size_t)kamera_logits_rows(a) * (size_t)kamera_logits_n_vocab(a);
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = fabs((double)kamera_logits_data(a)[i] - kamera_logits_data(b)[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

#endif /* KAMERA_CAPI_CHECK_H */
