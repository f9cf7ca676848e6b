// kamera's logger. Every message goes to stderr: stdout carries only results (text, --json).
// The logger named "kamera" is also installed as spdlog's default logger on first use, so a stray
// spdlog::warn() cannot write to stdout either.
#pragma once

#include <spdlog/spdlog.h>

namespace kamera {

spdlog::logger& log();

}  // namespace kamera
