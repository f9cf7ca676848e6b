// A fixed set of threads running queued tasks, with a bounded queue: a full queue refuses the
// task instead of letting waits grow without bound.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kamera {

class WorkerPool {
 public:
  WorkerPool(int threads, int max_pending);
  ~WorkerPool();
  // False when max_pending tasks already wait, or the pool is stopping.
  bool try_post(std::function<void()> task);
  // Drops the tasks still waiting and joins the threads (a task running finishes first).
  void stop();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int max_pending_;
  bool stopping_ = false;
};

}  // namespace kamera
