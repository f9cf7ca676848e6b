#include "server/answer_threads.h"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

namespace kamera {

namespace asio = boost::asio;

struct AnswerThreads::Impl {
  explicit Impl(int threads) : pool(size_t(threads < 1 ? 1 : threads)) {}
  asio::thread_pool pool;
};

namespace {

class StrandSerial : public AnswerThreads::Serial {
 public:
  explicit StrandSerial(asio::thread_pool& pool) : strand_(asio::make_strand(pool)) {}
  void post(std::function<void()> job) override { asio::post(strand_, std::move(job)); }

 private:
  asio::strand<asio::thread_pool::executor_type> strand_;
};

}  // namespace

AnswerThreads::AnswerThreads(int threads) : impl_(std::make_unique<Impl>(threads)) {}

AnswerThreads::~AnswerThreads() {
  join();
}

std::shared_ptr<AnswerThreads::Serial> AnswerThreads::serial() {
  return std::make_shared<StrandSerial>(impl_->pool);
}

void AnswerThreads::post(std::function<void()> job) {
  asio::post(impl_->pool, std::move(job));
}

void AnswerThreads::join() {
  impl_->pool.join();
}

}  // namespace kamera
