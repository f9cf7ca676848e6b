// Clocks: wall-clock milliseconds of a steady clock (timings that are reported, never logic), and
// the calling thread's CPU time (benches report it beside wall time, since it does not count the
// waits of a busy, shared CPU; grammar::Budget bounds a compile's CPU with it).
#pragma once

#include <time.h>

#include <chrono>

namespace kamera {

inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

inline double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

}  // namespace kamera
