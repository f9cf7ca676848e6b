#include "serve/generation.h"

#include <algorithm>
#include <chrono>

namespace kamera {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

bool text_only(const GenRequest& r) {
  return r.window_id.empty() && std::none_of(r.parts.begin(), r.parts.end(),
                                             [](const PromptPart& p) { return p.is_chunk; });
}

bool text_and_images(const GenRequest& r) {
  return r.window_id.empty() &&
         std::all_of(r.parts.begin(), r.parts.end(), [&](const PromptPart& p) {
           return !p.is_chunk || (r.media && r.media->find(p.id) != nullptr);
         });
}

bool has_images(const GenRequest& r) {
  return r.plan.has_media();
}

}  // namespace kamera
