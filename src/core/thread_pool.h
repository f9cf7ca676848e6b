// A small blocking thread pool for kamera's element-wise and attention kernels.
// Workers sleep on a condition variable between jobs (no spinning), so they do not steal cycles
// from OpenBLAS's own threads, which run the large GEMMs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kamera {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads >= 1; the caller counts as one of them
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) on disjoint contiguous pieces covering [0, n), one piece per thread
  // (fewer when n is small); returns when all are done. Not reentrant.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);
  // Same, and also passes the piece index in [0, size()), e.g. to pick per-thread scratch.
  void parallel_pieces(int64_t n,
                       const std::function<void(int64_t begin, int64_t end, int piece)>& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_pieces_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace kamera
