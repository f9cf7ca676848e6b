// What travels between the HTTP side and the scheduler: a parsed completion request, the
// generation the scheduler decodes for it, and the channel of events it answers through.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/chunk_cache.h"
#include "model/sampler.h"
#include "server/request_media.h"
#include "window/window.h"

namespace kamera {

// One piece of a prompt: text, or a reference to a cached chunk.
struct PromptPart {
  bool is_chunk = false;
  std::string text;
  ChunkId id;
  // Bytes of `text` the chat template wrote (sorted, disjoint): only there are control tokens
  // read; the rest is the client's, literal (server/prompt_parts.h).
  std::vector<TextRange> control;
};

struct GenRequest {
  std::vector<PromptPart> parts;  // the last one is the query (text)
  int max_tokens = 64;
  SamplerParams sampling;
  ServePolicy policy = ServePolicy::Patch;
  int rank = 32;
  bool deep_half = false;
  bool stream = false;    // answer as server-sent events
  std::string window_id;  // non-empty: generate after this window's content (on a fork)
  std::shared_ptr<RequestMedia> media;  // images of a chat request (their chunk parts' content)
};

// What the HTTP side learns about a generation, event by event.
struct Event {
  enum Kind { Text, Done, Error } kind;
  std::string text;
  nlohmann::json info;  // Done: usage and finish reason; Error: error body
  int status = 200;
};

// Where a generation's events go, in order, called on the scheduler thread.
using EventSink = std::function<void(Event)>;

// A generation being decoded by the scheduler.
struct Generation {
  GenRequest req;
  EventSink out;
  std::string client;  // who asked (API key or peer address): quotas
  std::shared_ptr<std::atomic<bool>> cancelled;
  SeqId seq = -1;
  std::unique_ptr<Window> window_fork;  // keeps the forked sequence alive
  std::unique_ptr<Sampler> sampler;
  int32_t last = 0;
  int32_t next_pos = 0;
  int generated = 0;
  nlohmann::json usage;
  double t_submit = 0, t_first = 0;
  std::shared_ptr<void> client_slot;  // the client's count of requests in flight, held till done
};

// Seconds on a monotonic clock.
double now_s();

}  // namespace kamera
