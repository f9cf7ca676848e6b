#include "server/generation.h"

#include <chrono>

namespace kamera {

void Channel::push(Event e) {
  std::lock_guard<std::mutex> lock(mu_);
  q_.push_back(std::move(e));
  cv_.notify_all();
}

Event Channel::pop() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !q_.empty(); });
  Event e = std::move(q_.front());
  q_.pop_front();
  return e;
}

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace kamera
