// Audio clips at the entry points beyond the server, through the built `kamera` binary, on the
// committed tiny Qwen2.5-Omni pair (tests/data/qwen25o: the audio half of a two-half mmproj
// beside a qwen2vl thinker, a 2-s 16 kHz clip):
//   - `kamera logits --mmproj --audio`: the logits after the clip are those of the server's tower
//     (audio/audio_tower.h load_media_tower) placed through the chunk cache after llama.cpp
//     mtmd's tokens of the same prompt (within 1e-5 of the scale), and llama.cpp's own logits
//     (within 1e-3: the tower's f16 convolutions there); the clip as FLAC gives the same logits;
//     `kamera generate --audio` runs the prompt;
//   - misuse is refused by name: audio to a picture tower, a picture to the audio-only tower, a
//     file that is no audio, counts and delimiters, --audio without --mmproj;
//   - `kamera chat --mmproj --audio` (and /audio): the follow-up turn keeps the clip's KV and both
//     replies equal a chat that prefills the whole conversation every turn (--no-cache-reuse).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "audio/audio_tower.h"
#include "cache/chunk_cache.h"
#include "media/audio_file.h"
#include "support/audio_encode.h"
#include "support/idefics3_fixture.h"
#include "support/shell.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

namespace {

using namespace kamera;

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/";
const std::string kDec = kDir + "qwen25o/decoder.gguf", kMm = kDir + "qwen25o/mmproj.gguf",
                  kClip = kDir + "qwen25o/clip_16k.wav";
// llama.cpp's prompt of tests/data/qwen25o/README.md, the clip where mtmd put <__media__>
// (newlines and all, inside the shell's single quotes)
const std::string kPrompt =
    "<|im_start|>user\n<|audio_bos|><audio><|audio_eos|>the<|im_end|>\n<|im_start|>assistant\n";

ShellOutput kamera_cli(const std::string& args, const std::string& stdin_text = "") {
  const std::string in = unique_temp("kamera-audio-cli.stdin");
  std::ofstream(in) << stdin_text;
  ShellOutput o = run_shell(std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args + " <" + in);
  std::remove(in.c_str());
  return o;
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// `kamera logits ... --audio clip -p kPrompt --json`
nlohmann::json cli_logits(const std::string& clip) {
  const ShellOutput o = kamera_cli("logits -m " + kDec + " --mmproj " + kMm + " --audio " + clip +
                                   " -t 1 --json -p '" + kPrompt + "'");
  EXPECT_EQ(o.rc, 0) << o.err;
  return nlohmann::json::parse(o.out, nullptr, false);
}

// mtmd's text chunks around the clip (tests/data/qwen25o/llama_cpp.json).
std::pair<std::vector<int32_t>, std::vector<int32_t>> mtmd_tokens() {
  std::ifstream jf(kDir + "qwen25o/llama_cpp.json");
  const auto ref = nlohmann::json::parse(jf);
  std::vector<int32_t> before, after;
  bool seen = false;
  for (const auto& c : ref["chunks"]) {
    if (c.contains("image")) {
      seen = true;
      continue;
    }
    for (int32_t t : c["text"]) (seen ? after : before).push_back(t);
  }
  return {before, after};
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

}  // namespace

TEST(AudioCli, LogitsAfterTheClipAreTheServersTowerPlaced) {
  const auto j = cli_logits(kClip);
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j["pieces"].size(), 3u);
  EXPECT_EQ(j["pieces"][1]["audio_rows"], 750);
  EXPECT_EQ(j["pieces"][1]["extent"], 750);  // positions (i, i, i)
  const auto [before, after] = mtmd_tokens();
  EXPECT_EQ(j["pieces"][0]["tokens"].get<std::vector<int32_t>>(), before);
  EXPECT_EQ(j["pieces"][2]["tokens"].get<std::vector<int32_t>>(), after);
  EXPECT_EQ(j["next_position"], int(before.size() + 750 + after.size()));
  const std::vector<float> cli = j["logits"][0].get<std::vector<float>>();

  // the server's tower and placement: load_media_tower, audio_chunk, the chunk cache
  auto ctx = tiny::context(kDec, 1024, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  auto tower = load_media_tower(kMm, ctx->model(), 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  auto clip = load_audio(kClip, 16000);
  ASSERT_TRUE(clip.ok()) << clip.message();
  auto chunk = (*tower)->audio_chunk(clip->samples, nullptr, {});
  ASSERT_TRUE(chunk.ok()) << chunk.message();
  ChunkCache& cc = ctx->cache();
  ScopedSequence s(ctx->pool());
  const int32_t nb = int32_t(before.size());
  ASSERT_TRUE(cc.forward_chunk(s.id(), ChunkContent::from_tokens(before), 0).ok());
  ASSERT_TRUE(cc.forward_chunk(s.id(), **chunk, nb).ok());
  auto lib = cc.forward_chunk(s.id(), ChunkContent::from_tokens(after), nb + (*chunk)->n(),
                              LogitsMode::Last);
  ASSERT_TRUE(lib.ok()) << lib.message();
  ASSERT_EQ(lib->size(), cli.size());
  const double scale = max_abs(*lib);
  const double d = tiny::max_abs_diff(*lib, cli);
  std::printf("kamera logits --audio vs the server's tower placed: |d| %.3e (%.2e of %.3g)\n", d,
              d / scale, scale);
  EXPECT_LE(d, 1e-5 * scale);
  const std::vector<float> mtmd = idefics3_fixture::read_f32(kDir + "qwen25o/llama_cpp_logits.f32");
  ASSERT_EQ(mtmd.size(), cli.size());
  const double rel = idefics3_fixture::rel_diff(cli.data(), mtmd.data(), cli.size());
  std::printf("kamera logits --audio vs llama.cpp mtmd: %.3e of the largest |logit|\n", rel);
  EXPECT_LT(rel, 1e-3);

  // the clip as FLAC (lossless) is the same clip
  const auto flac = audio_encode::flac16k(audio_encode::wav_pcm16(file_bytes(kClip)));
  ASSERT_FALSE(flac.empty());
  const std::string flac_path = unique_temp("kamera-audio-cli.flac");
  std::ofstream(flac_path, std::ios::binary)
      .write(reinterpret_cast<const char*>(flac.data()), std::streamsize(flac.size()));
  const auto fj = cli_logits(flac_path);
  std::remove(flac_path.c_str());
  ASSERT_TRUE(fj.is_object());
  EXPECT_EQ(fj["logits"][0].get<std::vector<float>>(), cli);

  // generate runs the same prompt
  const ShellOutput g = kamera_cli("generate -m " + kDec + " --mmproj " + kMm + " --audio " +
                                   kClip + " -t 1 -n 3 --temp 0 --json -p '" + kPrompt + "'");
  EXPECT_EQ(g.rc, 0) << g.err;
  EXPECT_NE(g.err.find("750 audio rows"), std::string::npos) << g.err;
}

// The Omni file's vision half takes the picture beside the clip in one prompt: the picture's
// piece has the rows `vision-embed` gives for it (4 x 5 after the merge) and the clip's 750.
TEST(AudioCli, OmniPictureAndClipInOnePrompt) {
  const std::string png = kDir + "llava/img_32.png";
  const ShellOutput o = kamera_cli("logits -m " + kDec + " --mmproj " + kMm + " --image " + png +
                                   " --audio " + kClip +
                                   " -t 1 --json -p '<|vision_start|><image><|vision_end|> and "
                                   "<|audio_bos|><audio><|audio_eos|>'");
  ASSERT_EQ(o.rc, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out.substr(0, 300);
  const ShellOutput e = kamera_cli("vision-embed --mmproj " + kMm + " --image " + png + " --json");
  ASSERT_EQ(e.rc, 0) << e.err;
  const auto ej = nlohmann::json::parse(e.out, nullptr, false);
  ASSERT_TRUE(ej.is_object());
  int64_t image_rows = -1, audio_rows = -1;
  for (const auto& p : j["pieces"]) {
    if (p.contains("image_rows")) image_rows = p["image_rows"].get<int64_t>();
    if (p.contains("audio_rows")) audio_rows = p["audio_rows"].get<int64_t>();
  }
  EXPECT_EQ(image_rows, int64_t(ej["embeddings"].size()));
  EXPECT_EQ(audio_rows, 750);
  for (const auto& v : j["logits"][0]) ASSERT_TRUE(std::isfinite(v.get<double>()));
}

TEST(AudioCli, MisuseIsRefusedByName) {
  const std::string base = "logits -m " + kDec + " -t 1 ";
  const std::string png = kDir + "llava/img_32.png";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"logits -m " + kDir + "llava/decoder.gguf -t 1 --mmproj " + kDir +
           "llava/mmproj.gguf --audio " + kClip + " -p 'a <audio> b'",
       "is a picture tower; audio needs an audio tower's mmproj"},
      {base + "--mmproj " + kMm + " --audio " + kMm + " -p '<|audio_bos|><audio><|audio_eos|>'",
       "not a WAV, FLAC or MP3 file"},
      {base + "--audio " + kClip + " -p '<|audio_bos|><audio><|audio_eos|>'",
       "--audio needs --mmproj"},
      {base + "--mmproj " + kMm + " --audio " + kClip + " -p 'no marker'",
       "-p has 0 <audio> marker(s) but 1 --audio"},
      {base + "--mmproj " + kMm + " --audio " + kClip + " -p 'a <audio> b'",
       "<audio> marker 1 must be written as <|audio_bos|><audio><|audio_eos|>"},
  };
  for (const auto& [args, msg] : bad) {
    const ShellOutput b = kamera_cli(args);
    EXPECT_NE(b.rc, 0) << args;
    EXPECT_NE(b.err.find(msg), std::string::npos) << args << "\n" << b.err;
  }
}

// kamera chat --mmproj --audio: turn 2 reuses turn 1's prompt, the clip's rows included, and both
// turns answer as a chat that prefills everything every turn; /audio attaches the same clip.
TEST(AudioCli, ChatKeepsTheClipAndAnswersAsAFullPrefill) {
  const std::string base =
      "chat -m " + kDec + " --mmproj " + kMm + " --temp 0 -n 5 -t 1 -v --chat-template chatml ";
  const std::string script = "What is it?\nAnd again?\n/quit\n";
  const ShellOutput o = kamera_cli(base + "--audio " + kClip, script);
  ASSERT_EQ(o.rc, 0) << o.err;
  const size_t at = o.err.find("turn 2: prompt");
  ASSERT_NE(at, std::string::npos) << o.err;
  int prompt = 0, reused = 0;
  ASSERT_EQ(
      std::sscanf(o.err.c_str() + at, "turn 2: prompt %d tokens, %d reused", &prompt, &reused), 2);
  std::printf("chat turn 2: prompt %d rows, %d reused\n", prompt, reused);
  EXPECT_GT(reused, 750);  // the clip's rows and the text before them
  EXPECT_LT(reused, prompt);
  EXPECT_NE(o.err.find("1 image(s) encoded"), std::string::npos) << o.err;  // the clip, once
  const ShellOutput full = kamera_cli(base + "--audio " + kClip + " --no-cache-reuse", script);
  ASSERT_EQ(full.rc, 0) << full.err;
  EXPECT_EQ(o.out, full.out);
  EXPECT_GE(std::count(o.out.begin(), o.out.end(), '\n'), 2) << o.out;
  const ShellOutput slash = kamera_cli(base, "/audio " + kClip + "\n" + script);
  ASSERT_EQ(slash.rc, 0) << slash.err;
  EXPECT_NE(slash.err.find("audio clip attached"), std::string::npos) << slash.err;
  EXPECT_EQ(slash.out, o.out);
  // audio to a picture tower's chat, by name
  const ShellOutput pic = kamera_cli("chat -m " + kDir + "llava/decoder.gguf --mmproj " + kDir +
                                         "llava/mmproj.gguf -t 1 -n 2 --audio " + kClip,
                                     "hi\n/quit\n");
  EXPECT_NE(pic.rc, 0);
  EXPECT_NE(pic.err.find("is a picture tower"), std::string::npos) << pic.err;
}
