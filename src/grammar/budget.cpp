#include "grammar/budget.h"

#include "core/clock.h"

namespace kamera::grammar {

namespace {

constexpr size_t kCheckEvery = size_t(1) << 14;  // work units between clock reads

double thread_cpu_seconds() {
  return thread_cpu_ms() * 1e-3;
}

}  // namespace

Budget::Budget(BudgetLimits limits, std::function<bool()> cancelled)
    : limits_(limits), cancelled_(std::move(cancelled)), cpu_start_(thread_cpu_seconds()) {}

double Budget::cpu_seconds() const {
  return thread_cpu_seconds() - cpu_start_;
}

Status Budget::fail(Stop why) {
  stop_ = why;
  switch (why) {
    case Stop::States:
      return make_error(ErrorCode::Unsupported,
                        "grammar: the schema needs more than {} automaton states (the server's "
                        "grammar budget, --grammar-states)",
                        limits_.max_states);
    case Stop::Time:
      return make_error(ErrorCode::Unsupported,
                        "grammar: compiling the schema took more than {:g} s of CPU (the server's "
                        "grammar budget, --grammar-seconds)",
                        limits_.max_cpu_seconds);
    case Stop::Cancelled:
    case Stop::None:
      break;
  }
  return make_error(ErrorCode::Internal, "grammar: the compile was cancelled");
}

Status Budget::check() {
  work_ = 0;
  if (cancelled_ && cancelled_()) return fail(Stop::Cancelled);
  if (cpu_seconds() > limits_.max_cpu_seconds) return fail(Stop::Time);
  return Status::Ok();
}

Status Budget::charge_states(size_t n) {
  if (stop_ != Stop::None) return fail(stop_);
  states_ += n;
  if (states_ > limits_.max_states) return fail(Stop::States);
  return charge_work(n);
}

Status Budget::charge_nodes(size_t n) {
  if (stop_ != Stop::None) return fail(stop_);
  nodes_ += n;
  if (nodes_ > limits_.max_states / 2) return fail(Stop::States);
  return charge_work(n);
}

Status Budget::charge_work(size_t units) {
  if (stop_ != Stop::None) return fail(stop_);
  work_ += units;
  return work_ >= kCheckEvery ? check() : Status::Ok();
}

}  // namespace kamera::grammar
