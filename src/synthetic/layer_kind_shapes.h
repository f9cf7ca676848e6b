// make-model's smollm3 and gemma3 shapes (the loader's side is model/layer_kinds.h, whose header
// lists the keys and tensors).
#pragma once

#include <string>

#include "model/config.h"

namespace kamera {

class GgufWriter;

// Presets: smollm3 "tiny" (4 layers, the fourth without rope) and "3b" (SmolLM3-3B as released:
// 36 layers, hidden 2048, 16 heads of 128 on 4 KV heads, FFN 11008, vocab 128256, rope base 5e6,
// tied head); gemma3 "tiny" (6 layers: 5 sliding-window layers of window 8, then a global one;
// head 16 on a 64 residual) and "1b" (Gemma-3-1B's text decoder: 26 layers, hidden 1152, 4 heads
// of 256 on 1 KV head, FFN 6912, vocab 262144, window 512, rope bases 1e6 global / 1e4 local).
// False for another architecture or name.
bool layer_kind_preset(Arch arch, const std::string& preset, ModelConfig& c);

// gemma3's attention.sliding_window (what llama.cpp's converter writes; the pattern key only
// when it is not llama.cpp's default 6, the local rope base only when not 10000).
void write_layer_kind_keys(GgufWriter& w, const ModelConfig& c);

}  // namespace kamera
