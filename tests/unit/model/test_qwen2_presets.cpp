// make-model's qwen2 presets at the sizes agents run (issue 51: 3B and 7B shapes): the shapes of
// Qwen2.5-3B and Qwen2.5-7B as their config.json files give them, checked against the parameter
// counts their model cards publish (3.09 B and 7.61 B, embeddings included).
#include <gtest/gtest.h>

#include "synthetic/synthetic_model.h"

using namespace kamera;

TEST(Qwen2Presets, ThreeAndSevenBillionHaveTheReleasedShapes) {
  const auto b3 = synthetic_preset(Arch::Qwen2, "3b");
  ASSERT_TRUE(b3);
  EXPECT_EQ(b3->dim, 2048);
  EXPECT_EQ(b3->n_layers, 36);
  EXPECT_EQ(b3->n_kv_heads, 2);
  EXPECT_TRUE(b3->tied_output);
  EXPECT_NEAR(double(count_parameters(*b3)) / 1e9, 3.09, 0.005);
  const auto b7 = synthetic_preset(Arch::Qwen2, "7b");
  ASSERT_TRUE(b7);
  EXPECT_EQ(b7->dim, 3584);
  EXPECT_EQ(b7->n_heads, 28);
  EXPECT_EQ(b7->ffn_dim, 18944);
  EXPECT_FALSE(b7->tied_output);
  EXPECT_NEAR(double(count_parameters(*b7)) / 1e9, 7.61, 0.01);
  EXPECT_FALSE(synthetic_preset(Arch::Llama, "7b")) << "the 7b preset is qwen2's";
}
