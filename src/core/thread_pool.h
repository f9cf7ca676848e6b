// A small thread pool for kamera's kernels: parallel_for splits a range into one piece per thread.
//
// Between jobs the workers spin on an atomic job counter for a short while (spin_us, 200 us by
// default), then sleep on a condition variable. Decode runs a dozen short jobs per layer, each a
// few tens of microseconds apart, and a sleeping worker is slow to wake on a VM (the hypervisor
// has to run a halted vCPU again); docs/BENCHMARKS.md (issue 27) has the A/B. The short window
// keeps the spinning away from long single-threaded stretches (and from OpenBLAS's own threads in
// the f32 GEMMs). KAMERA_POOL_SPIN_US=0 makes every wait a sleep (A/B measurements).
#pragma once

#include <atomic>
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
  // Microseconds a waiting thread spins before it sleeps (KAMERA_POOL_SPIN_US, else 200; 0 when
  // the pool has more threads than the machine has CPUs).
  int spin_us() const { return spin_us_; }

  // Calls fn(begin, end) on disjoint contiguous pieces covering [0, n), one piece per thread
  // (fewer when n is small); returns when all are done. Not reentrant.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);
  // Same, and also passes the piece index in [0, size()), e.g. to pick per-thread scratch.
  void parallel_pieces(int64_t n,
                       const std::function<void(int64_t begin, int64_t end, int piece)>& fn);

  // What the jobs that ran on more than one thread cost since the pool was made or reset_stats():
  // their count, their wall time (the caller's start to the last piece's end), and their tails
  // (the first piece's end to the last's: the threads already done wait at the barrier that long).
  // Read and reset by the caller of parallel_for (bench decode reports them per token).
  struct Stats {
    uint64_t jobs = 0;
    double job_ms = 0, tail_ms = 0;
  };
  Stats stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  void worker_loop(int index);
  // Spins up to spin_us_ for done() to hold, then sleeps on cv (sleepers counts the sleepers).
  template <class Done>
  void wait_for(const Done& done, std::condition_variable& cv, std::atomic<int>& sleepers);
  void wake(std::condition_variable& cv, const std::atomic<int>& sleepers);

  int n_threads_;
  int spin_us_ = 0;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  std::atomic<int> start_sleepers_{0}, done_sleepers_{0};
  // The job: written by the caller before generation_ is bumped, read by workers after.
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_pieces_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // Per thread, the steady-clock ns at which its piece of the current job ended (written before
  // it checks in, read by the caller after the barrier).
  std::vector<int64_t> piece_end_ns_;
  Stats stats_;
};

}  // namespace kamera
