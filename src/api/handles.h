// The C API's handles (include/kamera.h) as C++ structs, and the boundary helpers every entry
// point uses: no exception crosses the API, a failure sets the thread's last error and returns
// its code, and null or bad arguments are reported, never dereferenced.
//
// Ownership: handles that run on a context (sequence, window, logits) hold a shared reference to
// a ContextBox, so the user may free them in any order; the box owns the kamera::Context, which
// owns the engine, pool and store and shares the model.
#pragma once

#include <fmt/format.h>

#include <array>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/tower_handle.h"
#include "context/context.h"
#include "kamera.h"
#include "model/sampler.h"
#include "vision/encoder.h"
#include "window/window.h"

struct kamera_model {
  std::shared_ptr<const kamera::Model> model;
  kamera::KvLayout layout;  // model->kv_layout(), kept for the channel names it hands out
};

namespace kamera::api {

struct ContextBox {
  std::unique_ptr<Context> ctx;
};

}  // namespace kamera::api

struct kamera_context {
  std::shared_ptr<kamera::api::ContextBox> box;
};

struct kamera_chunk {
  kamera::ChunkContent content;
  kamera::ChunkId id;
  std::array<uint64_t, 2> fingerprint{};                    // of the model the chunk was made for
  std::shared_ptr<const kamera::CanonicalEntry> canonical;  // set by kamera_context_cache_chunk
  // Canonicals it held before (cached in another context): kamera_chunk_kv views stay valid
  // while the chunk lives.
  std::vector<std::shared_ptr<const kamera::CanonicalEntry>> retired;
};

struct kamera_seq {
  std::shared_ptr<kamera::api::ContextBox> box;  // declared first: destroyed after the sequence
  kamera::SeqId seq = -1;
  int32_t next_position = 0;
  kamera_serve_report report{};  // what assembled it, and a segment per chunk or run
  std::vector<kamera_segment> segments;
  // A prompt kamera_prompt_eval served: its plan, the assembler's marks, and the tokens evaluated
  // on it since (kamera_seq_remember keeps them all).
  std::unique_ptr<kamera::PromptPlan> plan;
  kamera::Assembly assembly;
  std::vector<int32_t> after;
  kamera_seq() = default;
  kamera_seq(const kamera_seq&) = delete;
  kamera_seq& operator=(const kamera_seq&) = delete;
  ~kamera_seq();
};

struct kamera_window {
  std::shared_ptr<kamera::api::ContextBox> box;  // declared first: destroyed after the window
  std::unique_ptr<kamera::Window> window;
};

struct kamera_logits {
  std::shared_ptr<kamera::api::ContextBox> box;  // unused by the data; keeps lifetimes simple
  std::vector<float> data;
  int32_t rows = 0, n_vocab = 0;
};

struct kamera_sampler {
  kamera::Sampler sampler;
};

struct kamera_vision {
  kamera::VisionModel model;  // the mini-VL's encoder (fixed-size frames), or
  std::unique_ptr<kamera::VisionEncoder> encoder;
  std::unique_ptr<kamera::api::QwenVisionHandle> qwen;       // a Qwen2-VL / 2.5-VL / 3-VL mmproj
  std::unique_ptr<kamera::api::KimiVisionHandle> kimi;       // a Kimi-VL mmproj (MoonViT)
  std::unique_ptr<kamera::api::PictureTowerHandle> picture;  // SmolVLM, Gemma 3, InternVL, LLaVA
};

namespace kamera::api {

// Records the message for kamera_last_error() on this thread and returns the status.
kamera_status set_error(kamera_status status, std::string message);
kamera_status set_error(const Error& e);

template <class... Args>
kamera_status fail(kamera_status status, fmt::format_string<Args...> f, Args&&... args) {
  return set_error(status, fmt::format(f, std::forward<Args>(args)...));
}

// "fn: what", without allocating on the way to the failure (an empty message if it must).
kamera_status fail_noexcept(kamera_status status, const char* fn, const char* what) noexcept;

inline kamera_status to_status(ErrorCode code) {
  return static_cast<kamera_status>(code);
}

// Runs the body of an entry point, turning escaped exceptions into statuses.
template <class F>
kamera_status guarded(const char* fn, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail_noexcept(KAMERA_ERR_OUT_OF_MEMORY, fn, "out of memory");
  } catch (const std::exception& e) {
    return fail_noexcept(KAMERA_ERR_INTERNAL, fn, e.what());
  } catch (...) {
    return fail_noexcept(KAMERA_ERR_INTERNAL, fn, "unknown exception");
  }
}

// Sets *out (when out is not null) to nullptr before the body runs, so failures leave it null.
template <class T>
void clear_out(T** out) {
  if (out) *out = nullptr;
}

// `fn: argument 'name' is null`.
kamera_status null_argument(const char* fn, const char* name);

// Fails when a chunk was made for another model than the context's.
kamera_status check_chunk_model(const char* fn, const kamera_chunk* chunk, const Model& model);

void write_hex(const ChunkId& id, char out[KAMERA_ID_HEX_SIZE]);

// Validates the content for the model and wraps it in a new chunk handle (*out).
kamera_status make_chunk(const char* fn, const Model& m, ChunkContent content, kamera_chunk** out);

}  // namespace kamera::api

// Null checks at the top of an entry point.
#define KAMERA_API_REQUIRE(fn, ptr)                            \
  do {                                                         \
    if (!(ptr)) return ::kamera::api::null_argument(fn, #ptr); \
  } while (0)
