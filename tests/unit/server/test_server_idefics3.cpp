// SmolVLM2 in /v1/chat/completions on the committed tiny pair (tests/data/idefics3: a SmolVLM
// tower in llama.cpp's mmproj layout beside a SmolLM2-style llama decoder). A picture becomes one
// chunk holding its tiles, its global image and the tokens between them; it is encoded once; sent
// again it is an exact prefix, moved it is relocated from the context it was seen in, and the
// greedy tokens of an exact hit equal a re-prefill's. A video, or a decoder other than llama,
// is refused by name.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/base64.h"
#include "support/idefics3_fixture.h"
#include "support/picture_chat.h"
#include "support/tiny_models.h"

using namespace kamera;

TEST(ServerIdefics3, PictureEncodedOnceExactAndRelocated) {
  auto model = tiny::load(idefics3_fixture::kDir + "decoder.gguf");
  ASSERT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = idefics3_fixture::kDir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(std::move(model)), o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const std::string img =
      "data:image/png;base64," + base64(file_bytes(idefics3_fixture::kDir + "img_144x96.png"));
  // 3 x 2 tiles and the global image of 16 rows each, 17 tokens around them
  picture_chat::expect_picture_reuse(client, img, 7 * 16 + 17);
}

TEST(ServerIdefics3, TowerNeedsALlamaDecoderOfItsWidth) {
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = idefics3_fixture::kDir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(tiny::load(tiny::model_path("qwen2vl"))), o);
  const Status s = server.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("llama"), std::string::npos) << s.message();
}
