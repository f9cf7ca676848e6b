// The threads that answer: the API layer's translators turn a generation's typed events
// (serve/events.h) into JSON and hand it to the HTTP front on these, never on the engine thread.
// A fixed pool (Boost.Asio's thread_pool): the server's thread count does not grow with its
// clients. Each answer gets a Serial, whose jobs run one at a time and in the order posted (an
// Asio strand), so a stream's chunks keep their order while different answers run in parallel.
#pragma once

#include <functional>
#include <memory>

namespace kamera {

class AnswerThreads {
 public:
  class Serial {
   public:
    virtual ~Serial() = default;
    // Runs `job` after every job posted before it on this Serial (never at once, in the caller).
    virtual void post(std::function<void()> job) = 0;
  };

  explicit AnswerThreads(int threads);
  ~AnswerThreads();  // join()
  AnswerThreads(const AnswerThreads&) = delete;
  AnswerThreads& operator=(const AnswerThreads&) = delete;

  std::shared_ptr<Serial> serial();
  // Runs a one-off job (an answer of its own: no order with any other).
  void post(std::function<void()> job);
  // Runs every job posted so far (and those they post), then joins the threads.
  void join();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kamera
