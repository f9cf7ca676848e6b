#include "core/fiber.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kamera {
namespace {

// Yields from `depth` nested calls, recording the order of the steps.
void nested(Fiber& f, std::vector<std::string>& log, int depth) {
  if (depth == 0) {
    log.push_back("bottom");
    f.yield();
    log.push_back("back at bottom");
    return;
  }
  char frame[256];  // a stack frame the fiber's stack must hold at every depth
  frame[0] = char(depth);
  nested(f, log, depth - 1);
  log.push_back("unwound " + std::to_string(int(frame[0])));
}

TEST(Fiber, YieldsFromDeepCallsAndResumesWhereItLeft) {
  std::vector<std::string> log;
  Fiber* self = nullptr;
  Fiber f([&] {
    log.push_back("start");
    self->yield();
    nested(*self, log, 3);
    log.push_back("end");
  });
  self = &f;
  EXPECT_FALSE(f.started());
  EXPECT_FALSE(f.resume());
  EXPECT_EQ(log, (std::vector<std::string>{"start"}));
  EXPECT_FALSE(f.resume());
  EXPECT_EQ(log.back(), "bottom");
  EXPECT_TRUE(f.resume());
  EXPECT_EQ(log, (std::vector<std::string>{"start", "bottom", "back at bottom", "unwound 1",
                                           "unwound 2", "unwound 3", "end"}));
  EXPECT_TRUE(f.finished());
  EXPECT_TRUE(f.resume());  // an ended fiber stays ended
}

TEST(Fiber, ExceptionsThrownAndCaughtInsideTheFiberUnwindItsOwnStack) {
  int caught = 0;
  Fiber* self = nullptr;
  Fiber f([&] {
    for (int i = 0; i < 3; ++i) {
      try {
        self->yield();
        throw std::runtime_error("inside");
      } catch (const std::runtime_error&) {
        ++caught;
      }
    }
  });
  self = &f;
  int resumes = 0;
  while (!f.resume()) ++resumes;
  EXPECT_EQ(resumes, 3);
  EXPECT_EQ(caught, 3);
}

// Many fibers on one thread, interleaved, each with its own stack: what a scheduler thread with
// many paused tasks does. No thread is started for them.
TEST(Fiber, ManyInterleavedFibersKeepTheirOwnLocals) {
  constexpr int kFibers = 64, kSteps = 5;
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<int64_t> sums(kFibers, 0);
  for (int i = 0; i < kFibers; ++i) {
    Fiber** slot = new Fiber*;
    fibers.push_back(std::make_unique<Fiber>([i, slot, &sums] {
      int64_t local = 0;  // lives on this fiber's stack across yields
      for (int s = 0; s < kSteps; ++s) {
        local += i * 1000 + s;
        (*slot)->yield();
      }
      sums[size_t(i)] = local;
      delete slot;
    }));
    *slot = fibers.back().get();
  }
  const auto main_thread = std::this_thread::get_id();
  for (int round = 0; round <= kSteps; ++round)
    for (auto& f : fibers) {
      f->resume();
      EXPECT_EQ(std::this_thread::get_id(), main_thread);
    }
  for (int i = 0; i < kFibers; ++i) {
    EXPECT_TRUE(fibers[size_t(i)]->finished());
    EXPECT_EQ(sums[size_t(i)], int64_t(kSteps) * i * 1000 + kSteps * (kSteps - 1) / 2);
  }
}

}  // namespace
}  // namespace kamera
