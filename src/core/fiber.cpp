#include "core/fiber.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define KAMERA_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KAMERA_FIBER_ASAN 1
#endif
#endif

#ifdef KAMERA_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace kamera {

struct Fiber::State {
  std::function<void()> fn;
  ucontext_t fiber{}, caller{};
  void* map = nullptr;  // guard page + stack
  size_t map_bytes = 0, page = 0;
  bool started = false, finished = false;
  // ASan: the stack each side runs on, and the fake stack of the side that switched away.
  const void* caller_bottom = nullptr;
  size_t caller_size = 0;
  void* caller_fake = nullptr;
  void* fiber_fake = nullptr;

  const void* stack_bottom() const { return static_cast<char*>(map) + page; }
  size_t stack_size() const { return map_bytes - page; }

  // Switches from the caller's stack to the fiber's, and back when the fiber yields or ends.
  void enter() {
#ifdef KAMERA_FIBER_ASAN
    __sanitizer_start_switch_fiber(&caller_fake, stack_bottom(), stack_size());
#endif
    swapcontext(&caller, &fiber);
#ifdef KAMERA_FIBER_ASAN
    __sanitizer_finish_switch_fiber(caller_fake, nullptr, nullptr);
#endif
  }
  // From the fiber's stack to the caller's; `last`: the fiber ends (its fake stack is freed).
  void leave(bool last) {
#ifdef KAMERA_FIBER_ASAN
    __sanitizer_start_switch_fiber(last ? nullptr : &fiber_fake, caller_bottom, caller_size);
#else
    (void)last;
#endif
    swapcontext(&fiber, &caller);
#ifdef KAMERA_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fiber_fake, &caller_bottom, &caller_size);
#endif
  }
};

namespace {

// makecontext passes int arguments: the state's address in two halves.
void fiber_main(unsigned lo, unsigned hi) {
  auto* s = reinterpret_cast<Fiber::State*>((uintptr_t(hi) << 32) | uintptr_t(lo));
#ifdef KAMERA_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &s->caller_bottom, &s->caller_size);
#endif
  try {
    s->fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kamera: exception escaped a fiber: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "kamera: exception escaped a fiber\n");
    std::abort();
  }
  s->finished = true;
  s->leave(true);  // never resumed again
  std::abort();
}

}  // namespace

Fiber::Fiber(std::function<void()> fn, size_t stack_bytes) : s_(std::make_unique<State>()) {
  s_->fn = std::move(fn);
  s_->page = size_t(sysconf(_SC_PAGESIZE));
  const size_t stack = (stack_bytes + s_->page - 1) / s_->page * s_->page;
  s_->map_bytes = stack + s_->page;
  s_->map = mmap(nullptr, s_->map_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (s_->map == MAP_FAILED) throw std::bad_alloc();
  mprotect(s_->map, s_->page, PROT_NONE);  // the guard page: the stack grows down into it
  getcontext(&s_->fiber);
  s_->fiber.uc_stack.ss_sp = static_cast<char*>(s_->map) + s_->page;
  s_->fiber.uc_stack.ss_size = stack;
  s_->fiber.uc_link = nullptr;
  const auto addr = uintptr_t(s_.get());
  makecontext(&s_->fiber, reinterpret_cast<void (*)()>(fiber_main), 2, unsigned(addr & 0xffffffffu),
              unsigned(addr >> 32));
}

Fiber::~Fiber() {
  if (s_->started && !s_->finished) {
    std::fprintf(stderr, "kamera: a fiber destroyed while paused\n");
    std::abort();
  }
  munmap(s_->map, s_->map_bytes);
}

bool Fiber::resume() {
  if (s_->finished) return true;
  s_->started = true;
  s_->enter();
  return s_->finished;
}

void Fiber::yield() {
  s_->leave(false);
}

bool Fiber::finished() const {
  return s_->finished;
}

bool Fiber::started() const {
  return s_->started;
}

}  // namespace kamera
