// stories260K (../shared/models) with its dev reuse items, in a context sized by a bench's own
// KV-capacity rule: the shared setup of the model-label bench tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "context/context.h"
#include "eval/reuse_bench.h"
#include "support/paths.h"

namespace test_paths {

struct StoriesBench {
  std::unique_ptr<kamera::Context> ctx;
  std::vector<kamera::ReuseItem> items;
  std::string skip, error;  // skip: the model file is absent; error: it failed to load
};

inline StoriesBench load_stories_bench(int64_t (*kv_tokens)(const kamera::Model&)) {
  StoriesBench b;
  const std::string p = stories_dir() + "/stories260K.bin";
  if (!exists(p)) {
    b.skip = "real model file " + p + " is absent (../shared/models is provided in CI)";
    return b;
  }
  auto m = kamera::load_model(p);
  if (!m.ok()) return b.error = m.message(), std::move(b);
  auto items = kamera::load_reuse_items(
      std::string(KAMERA_SOURCE_DIR) + "/data/reuse-stories260K.jsonl", **m);
  if (!items.ok()) return b.error = items.message(), std::move(b);
  kamera::ContextOptions co;
  co.kv_tokens = kv_tokens(**m);
  auto ctx = kamera::Context::create(std::move(*m), co);
  if (!ctx.ok()) return b.error = ctx.message(), std::move(b);
  b.ctx = std::move(*ctx);
  b.items = std::move(*items);
  return b;
}

}  // namespace test_paths

// Loads it into `var`, skipping the test when the model is absent and failing it on an error.
#define LOAD_STORIES_BENCH(var, kv_tokens)              \
  auto var = test_paths::load_stories_bench(kv_tokens); \
  if (!var.skip.empty()) GTEST_SKIP() << var.skip;      \
  ASSERT_TRUE(var.error.empty()) << var.error
