// LLaVA-1.5 in /v1/chat/completions on the committed tiny pair (tests/data/llava: a LLaVA tower
// in llama.cpp's mmproj layout beside a llama decoder). A picture becomes one chunk of its 64
// rows (no delimiters); it is encoded once; sent again it is an exact prefix, moved it is
// relocated from the context it was seen in, and the greedy tokens of an exact hit equal a
// re-prefill's. A decoder other than llama is refused by name.
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

}  // namespace

TEST(ServerLlava, PictureEncodedOnceExactAndRelocated) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = kDir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(std::move(model)), o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const std::string img = "data:image/png;base64," + base64(file_bytes(kDir + "img_32.png"));
  picture_chat::expect_picture_reuse(client, img, 64);
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
