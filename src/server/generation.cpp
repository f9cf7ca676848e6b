#include "server/generation.h"

#include <chrono>

namespace kamera {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace kamera
