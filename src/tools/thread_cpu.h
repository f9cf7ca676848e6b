// The calling thread's CPU time, for the benches that report it beside wall time (it does not
// count the waits of a busy, shared CPU).
#pragma once

#include <time.h>

namespace kamera::cli {

inline double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

}  // namespace kamera::cli
