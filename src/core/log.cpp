#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace kamera {

spdlog::logger& log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::get("kamera");
    if (!l) l = spdlog::stderr_logger_mt("kamera");
    spdlog::set_default_logger(l);
    return l;
  }();
  return *logger;
}

}  // namespace kamera
