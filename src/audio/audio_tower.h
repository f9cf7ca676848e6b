// The audio towers behind vision/'s MediaTower interface: `load_media_tower` loads an mmproj of
// any family the server serves, the audio ones (Qwen2-Audio's tower and Qwen2.5-Omni's audio half:
// audio/qwen_audio.h, by clip.projector_type; Qwen3-ASR's tower or Qwen3-Omni's audio half:
// audio/qwen3_audio.h, by clip.audio.projector_type "qwen3a") here, an Omni file (Qwen2.5-Omni's,
// Qwen3-Omni's: clip.has_vision_encoder beside the audio encoder) as one tower of both its halves
// (its vision half, a Qwen2.5-VL or Qwen3-VL tower, through MediaTower::load: pictures and clips
// in one conversation), and every picture tower through MediaTower::load. The audio room sits
// above vision/ (it reuses the CLIP loader and the picture cache's pieces), so the picture towers'
// loader cannot name it; the server calls this one.
#pragma once

#include <memory>
#include <string>

#include "vision/media_tower.h"

namespace kamera {

class ChunkStore;
struct Model;

// The tower of `mmproj` paired with `decoder` (errors as MediaTower::load's, and for an audio
// tower: not its thinker: a qwen2vl decoder for Qwen2.5-Omni's, a qwen3vl / qwen3vlmoe one for
// Qwen3's, of the tower's width, with the audio delimiters; an Omni file's vision half: its own).
Result<std::unique_ptr<MediaTower>> load_media_tower(const std::string& mmproj,
                                                     const Model& decoder, int threads,
                                                     ChunkStore* store);

}  // namespace kamera
