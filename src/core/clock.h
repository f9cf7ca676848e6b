// Wall-clock milliseconds of a steady clock, for timings that are reported (never for logic).
#pragma once

#include <chrono>

namespace kamera {

inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace kamera
