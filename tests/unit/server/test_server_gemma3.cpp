// Gemma 3 in /v1/chat/completions on the committed tiny pair (tests/data/gemma3: a Gemma 3 tower
// in llama.cpp's mmproj layout beside a gemma3 decoder). A picture becomes one chunk of its pooled
// rows between <start_of_image> and <end_of_image>; it is encoded once; sent again it is an exact
// prefix, moved it is relocated from the context it was seen in, and the greedy tokens of an exact
// hit equal a re-prefill's. A video, or a decoder other than gemma3, is refused by
// name.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/base64.h"
#include "support/gemma3_fixture.h"
#include "support/picture_chat.h"
#include "support/tiny_models.h"

using namespace kamera;

TEST(ServerGemma3, PictureEncodedOnceExactAndRelocated) {
  auto model = tiny::load(gemma3_fixture::kDir + "decoder.gguf");
  ASSERT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = gemma3_fixture::kDir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(std::move(model)), o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const std::string img =
      "data:image/png;base64," + base64(file_bytes(gemma3_fixture::kDir + "img_64.png"));
  picture_chat::expect_picture_reuse(client, img, 16);
}

TEST(ServerGemma3, TowerNeedsAGemma3DecoderOfItsWidth) {
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = gemma3_fixture::kDir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(tiny::load(tiny::model_path("qwen2vl"))), o);
  const Status s = server.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gemma3 decoder"), std::string::npos) << s.message();
}
