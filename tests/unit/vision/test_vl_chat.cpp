// Chat with images (vision/vl_chat_session.h and `kamera chat --mmproj --image`) on a tiny
// random-weight Qwen2-VL pair: a follow-up turn keeps the picture's KV (only the new text is
// prefilled) and answers exactly as a session that prefills everything every turn; the picture is
// encoded once; the CLI drives it from a stdin script, on a Kimi-VL pair too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/thread_pool.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "vision/vl_chat_session.h"

namespace {

using namespace kamera;

const std::string kImage =
    std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_vision/img_140x112.png";
const std::string kJpeg =
    std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_preprocess/color_70x50.jpg";

std::string tower_file() {
  static const std::string path = [] {
    const std::string p = unique_temp("kamera-vl-chat-mmproj.gguf");
    auto st = QwenVisionModel::random(*qwen_vision_preset("qwen2vl", "tiny"), 2)
                  .write_gguf(p, DType::F32);
    EXPECT_TRUE(st.ok()) << st.message();
    return p;
  }();
  return path;
}

struct Conversation {
  std::vector<std::string> replies;
  std::vector<TurnStats> stats;
  int64_t encodes = 0;
};

// Two turns about one image (and a second image in turn 2), greedy.
Conversation converse(bool reuse) {
  Conversation r;
  auto ctx = tiny::context(tiny::model_path("qwen2vl"), 2000, 16, size_t(1) << 26);
  auto tower = QwenVisionModel::load(tower_file());
  EXPECT_TRUE(tower.ok()) << tower.message();
  if (!tower.ok()) return r;
  ThreadPool threads(1);
  ChatOptions o;
  o.gen.max_tokens = 6;
  o.gen.sampling.temperature = 0;
  o.reuse_cache = reuse;
  auto tmpl = ChatTemplate::named("chatml");
  EXPECT_TRUE(tmpl.ok());
  auto chat = VlChatSession::create(*ctx, *tmpl, o, *tower, &threads);
  EXPECT_TRUE(chat.ok()) << chat.message();
  if (!chat.ok()) return r;
  VlChatSession& c = **chat;
  bool encoded = false;
  EXPECT_TRUE(c.attach_image(kImage, &encoded).ok());
  EXPECT_TRUE(encoded);
  for (const char* q : {"What is in the picture?", "And in this one?"}) {
    TurnStats st;
    auto reply = c.reply(q, {}, &st);
    EXPECT_TRUE(reply.ok()) << reply.message();
    r.replies.push_back(reply.ok() ? *reply : "");
    r.stats.push_back(st);
    EXPECT_TRUE(c.attach_image(kJpeg).ok());  // goes with the second message
    EXPECT_TRUE(c.attach_image(kImage, &encoded).ok());
    EXPECT_FALSE(encoded);  // seen before: not encoded again
  }
  r.encodes = c.image_stats().encodes;
  return r;
}

}  // namespace

TEST(VlChat, FollowUpKeepsTheImageAndAnswersAsAFullPrefill) {
  const Conversation cached = converse(true), full = converse(false);
  ASSERT_EQ(cached.replies.size(), 2u);
  ASSERT_EQ(full.replies.size(), 2u);
  EXPECT_EQ(cached.encodes, 2);  // two distinct pictures
  // turn 2 keeps turn 1's prompt, the image's 20 rows included (the cut may come inside the
  // reply, where its text re-tokenizes differently from the sampled ids)
  EXPECT_EQ(cached.stats[0].reused_tokens, 0);
  EXPECT_GT(cached.stats[1].reused_tokens, 20);
  EXPECT_LT(cached.stats[1].reused_tokens, cached.stats[1].prompt_tokens);
  EXPECT_EQ(full.stats[1].reused_tokens, 0);
  EXPECT_EQ(cached.stats[1].prompt_tokens, full.stats[1].prompt_tokens);
  EXPECT_GT(cached.stats[0].prompt_tokens, 20);  // 20 image rows and the text
  EXPECT_EQ(cached.replies, full.replies);
  EXPECT_EQ(cached.stats[1].generated_tokens, full.stats[1].generated_tokens);
}

TEST(VlChat, RefusesADecoderWithoutM_Rope) {
  auto ctx = tiny::context(tiny::model_path("qwen2"), 256, 16, size_t(1) << 24);
  auto tower = QwenVisionModel::load(tower_file());
  ASSERT_TRUE(tower.ok());
  auto tmpl = ChatTemplate::named("chatml");
  ASSERT_TRUE(tmpl.ok());
  auto chat = VlChatSession::create(*ctx, *tmpl, {}, *tower, nullptr);
  ASSERT_FALSE(chat.ok());
  EXPECT_NE(chat.message().find("qwen2vl"), std::string::npos) << chat.message();
}

namespace {

struct Output {
  std::string out, err;
  int rc = -1;
};

Output kamera_cli(const std::string& args, const std::string& stdin_text = "",
                  const std::string& tag = "kamera-vl-chat") {
  const std::string dir = unique_temp("");
  const std::string in = dir + tag + ".stdin", err = dir + tag + ".stderr";
  std::ofstream(in) << stdin_text;
  const std::string cmd =
      std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args + " <" + in + " 2>" + err;
  Output o;
  FILE* f = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; f && (n = fread(buf.data(), 1, buf.size(), f)) > 0;) o.out.append(buf.data(), n);
  o.rc = f ? pclose(f) : -1;
  std::ifstream e(err);
  o.err.assign(std::istreambuf_iterator<char>(e), {});
  return o;
}

}  // namespace

// kamera chat --mmproj --image, and /image in the script: replies on stdout, the verbose lines
// say the second turn reused the first's prompt and that each picture was encoded once.
TEST(VlChat, CliChatWithImages) {
  const std::string dec = unique_temp("kamera-vl-chat-dec.gguf");
  ASSERT_EQ(kamera_cli("make-model --arch qwen2vl --preset tiny --seed 3 -o " + dec).rc, 0);
  const std::string base = "chat -m " + dec + " --mmproj " + tower_file() +
                           " --temp 0 -n 5 -t 1 -v --chat-template chatml ";
  const Output o = kamera_cli(base + "--image " + kImage, "What is it?\n/image " + kJpeg +
                                                              "\nAnd this?\n/image " + kImage +
                                                              "\nThe first again?\n/quit\n");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_GE(o.out.size(), 3u) << o.out;  // three replies, a line each
  EXPECT_NE(o.err.find("turn 3: prompt"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("turn 2: prompt"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("2 image(s) encoded, 1 found"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("error"), std::string::npos) << o.err;
  // turn 2 reused at least turn 1's prompt: "prompt P tokens, R reused" with R > 20
  const size_t at = o.err.find("turn 2: prompt");
  int prompt = 0, reused = 0;
  ASSERT_EQ(
      std::sscanf(o.err.c_str() + at, "turn 2: prompt %d tokens, %d reused", &prompt, &reused), 2);
  EXPECT_GT(reused, 20);
  EXPECT_LT(reused, prompt);

  // misuse: --image without --mmproj; /image without a tower is an error line, not a crash
  const Output bad = kamera_cli("chat -m " + dec + " --image " + kImage, "");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("--mmproj"), std::string::npos) << bad.err;
  const Output plain = kamera_cli("chat -m " + dec + " -n 2 --temp 0 -t 1 --chat-template chatml",
                                  "/image " + kImage + "\nhi\n");
  EXPECT_EQ(plain.rc, 0) << plain.err;
  EXPECT_NE(plain.err.find("images need a vision tower"), std::string::npos) << plain.err;
  const Output help = kamera_cli("chat --help");
  EXPECT_NE(help.out.find("--mmproj"), std::string::npos);
  EXPECT_NE(help.out.find("/image"), std::string::npos);
}

// kamera chat --store-dir: a second run on the same directory reads the picture's embeddings back
// from the disk tier instead of running the tower, and answers the same.
TEST(VlChat, CliStoreDirKeepsImageEmbeddings) {
  const std::string tag = "kamera-vl-chat-store-" + std::to_string(::getpid());
  const std::string dec = unique_temp(tag) + "-dec.gguf", dir = unique_temp(tag);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(kamera_cli("make-model --arch qwen2vl --preset tiny --seed 3 -o " + dec, "", tag).rc,
            0);
  const std::string args = "chat -m " + dec + " --mmproj " + tower_file() +
                           " --temp 0 -n 4 -t 1 -v --chat-template chatml --store-dir " + dir +
                           " --image " + kImage;
  const Output first = kamera_cli(args, "What is it?\n/quit\n", tag);
  ASSERT_EQ(first.rc, 0) << first.err;
  EXPECT_NE(first.err.find("1 image(s) encoded, 0 found in the session's cache, 0 read from the "
                           "store"),
            std::string::npos)
      << first.err;
  const Output second = kamera_cli(args, "What is it?\n/quit\n", tag);
  ASSERT_EQ(second.rc, 0) << second.err;
  EXPECT_NE(second.err.find("0 image(s) encoded, 0 found in the session's cache, 1 read from the "
                            "store"),
            std::string::npos)
      << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_TRUE(std::filesystem::exists(dir + "/image"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove(dec);
}

// kamera chat --mmproj with Kimi-VL's tower beside a deepseek2 decoder whose vocabulary has the
// media tokens: the follow-up turn keeps the picture's KV and the replies equal a session that
// prefills the whole conversation every turn (--no-cache-reuse).
TEST(VlChat, CliChatWithAKimiTower) {
  const std::string dir = unique_temp("");
  const std::string dec = dir + "kamera-vl-chat-kimi.gguf",
                    mm = dir + "kamera-vl-chat-kimi-mm.gguf";
  // (seed 3's random decoder replies with byte 0x1e, the session's reserved image mark, which the
  // next turn refuses: a limitation of VlChatSession on any tower, not of Kimi-VL's)
  ASSERT_EQ(kamera_cli("make-model --arch deepseek2 --preset kimi-vl-tiny --seed 5 -o " + dec +
                       " --control-tokens '<|media_start|>,<|media_content|>,<|media_end|>'")
                .rc,
            0);
  ASSERT_EQ(kamera_cli("make-model --arch kimivl-mmproj --preset tiny --seed 4 -o " + mm).rc, 0);
  const std::string image = std::string(KAMERA_SOURCE_DIR) + "/tests/data/kimivl/img_112x112.png";
  const std::string base = "chat -m " + dec + " --mmproj " + mm + " --image " + image +
                           " --temp 0 -n 5 -t 1 -v --chat-template chatml ";
  const std::string script = "What is it?\nAnd again?\n/quit\n";
  const Output o = kamera_cli(base, script, "kamera-vl-chat-kimi");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.err.find("1 image(s) encoded"), std::string::npos) << o.err;
  const size_t at = o.err.find("turn 2: prompt");
  ASSERT_NE(at, std::string::npos) << o.err;
  int prompt = 0, reused = 0;
  ASSERT_EQ(
      std::sscanf(o.err.c_str() + at, "turn 2: prompt %d tokens, %d reused", &prompt, &reused), 2);
  EXPECT_GT(reused, 16);  // the picture's 16 rows and the text around them
  const Output full = kamera_cli(base + "--no-cache-reuse", script, "kamera-vl-chat-kimi-full");
  ASSERT_EQ(full.rc, 0) << full.err;
  EXPECT_EQ(o.out, full.out);
  for (const std::string& p : {dec, mm}) std::remove(p.c_str());
}
