// A stackful coroutine: a function that runs on a stack of its own, on the thread that resumes
// it, and hands control back (yield) from any depth of its calls. The server's sliced tasks
// (serve/sliced_task.h) run on these, so a task paused inside a forward costs a stack, not a
// thread.
//
// Built on glibc's ucontext (makecontext / swapcontext). Boost.Context would be the packaged
// choice, but Debian's libboost-context builds only its fcontext back end, whose fibers carry no
// AddressSanitizer annotations (the ASan build of the unit tests then reports false stack
// errors), and the ucontext back end that has them is not in Debian's library. Here every switch
// tells ASan which stack it moves to (__sanitizer_start_switch_fiber / finish_switch_fiber).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace kamera {

class Fiber {
 public:
  // `fn` starts at the first resume(); it must not let an exception escape (it is caught and
  // ends the program otherwise, as a thread's would). The stack is mapped lazily: only the pages
  // the function touches become memory; a guard page below it faults on an overflow.
  explicit Fiber(std::function<void()> fn, size_t stack_bytes = size_t(8) << 20);
  ~Fiber();  // the function has returned, or never started
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Caller: runs the function until it yields or returns; true once it has returned.
  bool resume();
  // Inside the function: hands control back to the caller of resume().
  void yield();
  bool finished() const;
  bool started() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace kamera
