// LLaVA-1.5 in /v1/chat/completions on the committed tiny pair (tests/data/llava: a LLaVA tower
// in llama.cpp's mmproj layout beside a llama decoder). A picture becomes one chunk of its 64
// rows (no delimiters); it is encoded once; sent again it is an exact prefix, moved it is
// relocated from the context it was seen in, and the greedy tokens of an exact hit equal a
// re-prefill's. A decoder other than llama is refused by name. The same for the LLaVA-1.6 tower
// (tests/data/llava16) and the MobileVLM V2 one (tests/data/mobilevlm) beside that decoder.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/base64.h"
#include "support/picture_chat.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/llava/";

// The tiny decoder beside the tower in `dir`; `picture` (of `rows` rows) through the chat.
void expect_served_picture_reuse(const std::string& dir, const std::string& picture, int rows) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = dir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(std::move(model)), o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const std::string img = "data:image/png;base64," + base64(file_bytes(dir + picture));
  picture_chat::expect_picture_reuse(client, img, rows);
}

}  // namespace

TEST(ServerLlava, PictureEncodedOnceExactAndRelocated) {
  expect_served_picture_reuse(kDir, "img_32.png", 64);
}

TEST(ServerLlava, TowerNeedsALlamaDecoder) {
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = kDir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(tiny::load(tiny::model_path("qwen2vl"))), o);
  const Status s = server.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs a llama decoder"), std::string::npos) << s.message();
}

// LLaVA-1.6 (tests/data/llava16: the grid's tower beside the same decoder): a 40 x 64 picture is
// one chunk of 240 rows (the base image and the unpadded 2 x 2 grid with its newline rows),
// encoded once, an exact prefix sent again, relocated when moved.
TEST(ServerLlava, AnyResolutionPictureEncodedOnceExactAndRelocated) {
  expect_served_picture_reuse(std::string(KAMERA_SOURCE_DIR) + "/tests/data/llava16/",
                              "img_40x64.png", 240);
}

// MobileVLM V2 (tests/data/mobilevlm: the ldpv2 projector): a 96 x 96 picture is 144 rows.
TEST(ServerLlava, Ldpv2PictureEncodedOnceExactAndRelocated) {
  expect_served_picture_reuse(std::string(KAMERA_SOURCE_DIR) + "/tests/data/mobilevlm/",
                              "img_96.png", 144);
}
