// Whisper's log-mel front end, as Hugging Face's WhisperFeatureExtractor computes it for
// Qwen2.5-Omni's audio tower and llama.cpp's mtmd feeds its Whisper-style encoders:
//
//   pad       the 16 kHz clip, then 30 s of zeros; n_fft / 2 samples reflected at the start
//             (torch.stft's center=True: sample 200 .. 1 before sample 0); zeros at the end
//   frames    every hop (160) samples, n_fft (400) samples times a periodic Hann window
//   power     |rfft|^2 of each frame: n_fft / 2 + 1 = 201 bins
//   mel       n_mels (128) triangular filters on the Slaney mel scale (linear below 1 kHz,
//             logarithmic above), 0 .. 8 kHz, Slaney area normalization (2 / (f_right - f_left))
//   log       log10(max(mel, 1e-10))
//   clamp     max(x, global max - 8), then (x + 4) / 4
//   windows   cut into windows of 3000 frames (30 s); an incomplete last window (padding only)
//             is dropped, so a clip of up to 30 s is one window and every window is 30 s
//
// The global max is taken over the kept windows. For a clip of at most 30 s this is
// WhisperFeatureExtractor(padding="max_length") frame for frame (its last frame dropped);
// longer clips are cut as llama.cpp's mtmd cuts them (HF pads or truncates to 30 s instead).
// llama.cpp floors the mel at 2^-24 instead of 1e-10: the two agree wherever the clip's loudest
// log-mel value is above -7.2 + 8 (the clamp then hides the floor), i.e. for any audible clip.
// Power and filters are computed in double (a 400-point DFT per frame; frames of padding alone
// skip it). tests/unit/media/test_audio.cpp checks it against tests/unit/media/whisper_mel.py.
#pragma once

#include <span>
#include <vector>

namespace kamera {

struct WhisperMelConfig {
  int sample_rate = 16000;
  int n_fft = 400;
  int hop = 160;
  int n_mels = 128;
  int window_frames = 3000;  // 30 s
};

struct LogMel {
  int n_mels = 0, n_frames = 0;
  std::vector<float> data;  // n_mels x n_frames, a mel bin's frames contiguous
};

// The Slaney-scale filter bank: n_mels x (n_fft / 2 + 1), row m the weights of filter m.
std::vector<double> slaney_mel_filters(const WhisperMelConfig& c);

// The clip's 30-second windows (at least one: an empty clip is one window of silence).
// samples are at c.sample_rate (media/audio_resample.h).
std::vector<LogMel> whisper_log_mel(std::span<const float> samples, const WhisperMelConfig& c = {});

// The clip's own frames, as llama.cpp's mtmd computes them for Qwen3-Omni / Qwen3-ASR's audio
// tower (qwen3a; WhisperFeatureExtractor called with truncation=False): the same frames, power,
// filters, log and clamp as above, but no 30 s of zeros: n_fft / 2 samples reflected at both ends
// (sample 200 .. 1 before sample 0, sample n - 2 .. n - 201 after sample n - 1; zeros where a
// clip is shorter than that), n / hop + 1 frames, the max taken over them. c.window_frames is
// not read (audio/qwen3_audio_encoder.h cuts the frames into the tower's windows).
LogMel centered_log_mel(std::span<const float> samples, const WhisperMelConfig& c = {});

}  // namespace kamera
