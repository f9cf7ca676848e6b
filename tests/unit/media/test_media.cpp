// Image decoding (media/): PNG and JPEG decode to the pixels PIL gives (hashes computed by
// tests/data/qwen_preprocess/make_expected.py with python3-pil), every PNG variant becomes 8-bit
// RGB, and hostile input (truncated, huge declared sizes, decompression bombs, garbage, CMYK)
// fails fast with an error that names the input.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "media/image.h"
#include "media/resize.h"

namespace {

using namespace kamera;

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_preprocess/";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return fmt::format("{:016x}", h);
}

nlohmann::json expected() {
  std::ifstream f(kDir + "expected.json");
  return nlohmann::json::parse(f);
}

// zlib's CRC-32 (PNG chunk checksums), bit by bit.
uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

void put_be32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}

// A copy of a PNG whose IHDR declares width x height (CRC fixed, so libpng accepts the header).
std::vector<uint8_t> png_declaring(std::vector<uint8_t> png, uint32_t width, uint32_t height) {
  put_be32(&png[16], width);  // signature 8, length 4, "IHDR" 4
  put_be32(&png[20], height);
  put_be32(&png[29], crc32(&png[12], 17));  // over "IHDR" + 13 data bytes
  return png;
}

// A copy of a JPEG whose SOF marker declares width x height.
std::vector<uint8_t> jpeg_declaring(std::vector<uint8_t> jpg, uint16_t width, uint16_t height) {
  for (size_t i = 2; i + 9 < jpg.size(); ++i)
    if (jpg[i] == 0xFF && (jpg[i + 1] == 0xC0 || jpg[i + 1] == 0xC1 || jpg[i + 1] == 0xC2)) {
      jpg[i + 5] = uint8_t(height >> 8);
      jpg[i + 6] = uint8_t(height);
      jpg[i + 7] = uint8_t(width >> 8);
      jpg[i + 8] = uint8_t(width);
      return jpg;
    }
  ADD_FAILURE() << "no SOF marker";
  return jpg;
}

template <class F>
double elapsed_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Media, DecodesLikePil) {
  const nlohmann::json exp = expected();
  for (const auto& c : exp["cases"]) {
    const std::string file = c["file"];
    auto img = load_image(kDir + file);
    ASSERT_TRUE(img.ok()) << img.message();
    EXPECT_EQ(img->width, c["decoded"][0].get<int>()) << file;
    EXPECT_EQ(img->height, c["decoded"][1].get<int>()) << file;
    EXPECT_EQ(fnv1a64(img->rgb.data(), img->rgb.size()), c["decoded_fnv1a64"].get<std::string>())
        << file << " (" << c["pil_mode"].get<std::string>() << ") decodes to other pixels than PIL";
  }
}

TEST(Media, SixteenBitPngKeepsTheHighByte) {
  auto rgb = load_image(kDir + "rgb16_5x4.png");
  ASSERT_TRUE(rgb.ok()) << rgb.message();
  ASSERT_EQ(rgb->width, 5);
  ASSERT_EQ(rgb->height, 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 5; ++x)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(rgb->at(x, y)[c], ((x * 4099 + y * 7919 + c * 104729) % 65536) >> 8);
  auto ga = load_image(kDir + "greyalpha16_5x4.png");  // grey + alpha: alpha dropped
  ASSERT_TRUE(ga.ok()) << ga.message();
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 5; ++x)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(ga->at(x, y)[c], ((x * 5003 + y * 3001) % 65536) >> 8);
}

TEST(Media, CmykJpegIsRefusedClearly) {
  auto r = load_image(kDir + "cmyk_8x8.jpg");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ErrorCode::Unsupported);
  EXPECT_NE(r.message().find("CMYK"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("cmyk_8x8.jpg"), std::string::npos) << r.message();
}

TEST(Media, TruncatedFilesAreErrorsNotGreyImages) {
  for (const char* file : {"rgb_61x47.png", "color_70x50.jpg", "grey_45x62.jpg"}) {
    const std::vector<uint8_t> full = read_bytes(kDir + file);
    for (size_t keep : {full.size() * 3 / 4, full.size() / 2, size_t(40), size_t(9)}) {
      auto r = decode_image(std::span(full.data(), keep), "cut image");
      ASSERT_FALSE(r.ok()) << file << " cut to " << keep << " bytes decoded";
      EXPECT_EQ(r.code(), ErrorCode::CorruptData) << r.message();
      EXPECT_NE(r.message().find("cut image"), std::string::npos) << r.message();
    }
  }
}

TEST(Media, HugeDeclaredSizesFailBeforeAllocating) {
  const std::vector<uint8_t> png = read_bytes(kDir + "rgb_61x47.png");
  const std::vector<uint8_t> jpg = read_bytes(kDir + "color_70x50.jpg");
  // A few KB that declare 4e10 pixels (120 GB of RGB), and within-side-limit bombs.
  const std::vector<std::vector<uint8_t>> hostile = {
      png_declaring(png, 200000, 200000), png_declaring(png, 19000, 19000),
      jpeg_declaring(jpg, 65000, 65000), jpeg_declaring(jpg, 15000, 15000)};
  for (const auto& bytes : hostile) {
    Result<Image> r = Image{};
    const double ms = elapsed_ms([&] { r = decode_image(bytes, "bomb"); });
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), ErrorCode::InvalidArgument) << r.message();
    EXPECT_NE(r.message().find("over the limit"), std::string::npos) << r.message();
    EXPECT_LT(ms, 200.0) << "refusing a hostile header took " << ms << " ms";
  }
  // A caller's tighter limits apply the same way.
  DecodeLimits small;
  small.max_pixels = 1000;
  auto r = decode_image(png, "small limit", small);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("61 x 47"), std::string::npos) << r.message();
  small = DecodeLimits{};
  small.max_bytes = 100;
  EXPECT_FALSE(decode_image(png, "byte limit", small).ok());
}

// The size from the header alone: what the decoder gives for real files, and what a hostile header
// declares (a 120 GB PNG, a 65000 x 65000 JPEG) at once, nothing allocated for its pixels.
TEST(Media, SizeIsReadFromTheHeaderAlone) {
  for (const char* name : {"rgb_61x47.png", "color_70x50.jpg", "rgba_120x90.png"}) {
    const std::vector<uint8_t> bytes = read_bytes(kDir + name);
    auto s = read_image_size(bytes, name);
    auto d = decode_image(bytes, name);
    ASSERT_TRUE(s.ok() && d.ok()) << name << ": " << s.message();
    EXPECT_EQ(s->width, d->width) << name;
    EXPECT_EQ(s->height, d->height) << name;
  }
  const std::vector<uint8_t> png = png_declaring(read_bytes(kDir + "rgb_61x47.png"), 200000, 3);
  const std::vector<uint8_t> jpg = jpeg_declaring(read_bytes(kDir + "color_70x50.jpg"), 65000, 9);
  Result<ImageSize> s = ImageSize{};
  EXPECT_LT(elapsed_ms([&] { s = read_image_size(png, "p"); }), 50.0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->width, 200000);
  EXPECT_EQ(s->rgb_bytes(), 200000 * 3 * 3);
  s = read_image_size(jpg, "j");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->width, 65000);
  EXPECT_EQ(s->height, 9);
  const std::vector<uint8_t> cut(png.begin(), png.begin() + 20);  // inside IHDR
  EXPECT_EQ(read_image_size(cut, "cut").code(), ErrorCode::CorruptData);
  EXPECT_EQ(read_image_size(std::vector<uint8_t>(64, 7), "junk").code(),
            ErrorCode::InvalidArgument);
}

// manyscans_16x16.jpg: a 16 x 16 progressive JPEG whose last scan is repeated 600 times (694
// scans, 10 KB; PIL decodes it), made by hand: jpegtran -scans (94 scans) on a crop of
// grey_45x62.jpg, then the last SOS segment duplicated by a few lines of Python.
TEST(Media, ProgressiveJpegScanBombIsRefused) {
  Result<Image> r = Image{};
  const double ms = elapsed_ms([&] { r = load_image(kDir + "manyscans_16x16.jpg"); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ErrorCode::CorruptData);
  EXPECT_NE(r.message().find("more than 500 scans"), std::string::npos) << r.message();
  EXPECT_LT(ms, 500.0);
}

TEST(Media, GarbageAndUnknownFormatsAreRefused) {
  std::vector<uint8_t> junk(300);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = uint8_t(i * 131 + 7);
  auto r = decode_image(junk, "junk");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ErrorCode::InvalidArgument);
  EXPECT_FALSE(decode_image({}, "empty").ok());
  // A valid signature followed by garbage.
  std::vector<uint8_t> fake_png = read_bytes(kDir + "rgb_61x47.png");
  for (size_t i = 40; i < fake_png.size(); ++i) fake_png[i] ^= 0x5A;
  auto p = decode_image(fake_png, "scrambled png");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.code(), ErrorCode::CorruptData) << p.message();
  std::vector<uint8_t> fake_jpg = read_bytes(kDir + "color_70x50.jpg");
  for (size_t i = 20; i < fake_jpg.size(); ++i) fake_jpg[i] = uint8_t(i * 17);
  EXPECT_FALSE(decode_image(fake_jpg, "scrambled jpeg").ok());
  auto missing = load_image(kDir + "no-such-image.png");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), ErrorCode::NotFound);
}

TEST(Media, BicubicKernelAndIdentityResize) {
  using media_detail::bicubic_kernel;
  EXPECT_DOUBLE_EQ(bicubic_kernel(0.0), 1.0);
  EXPECT_DOUBLE_EQ(bicubic_kernel(1.0), 0.0);
  EXPECT_DOUBLE_EQ(bicubic_kernel(2.0), 0.0);
  EXPECT_DOUBLE_EQ(bicubic_kernel(0.5), bicubic_kernel(-0.5));
  // The weights of a unit-spaced grid sum to 1 (partition of unity).
  for (double f : {0.1, 0.25, 0.7})
    EXPECT_NEAR(
        bicubic_kernel(f + 1) + bicubic_kernel(f) + bicubic_kernel(f - 1) + bicubic_kernel(f - 2),
        1.0, 1e-12);
  auto img = load_image(kDir + "rgb_61x47.png");
  ASSERT_TRUE(img.ok());
  auto same = resize_bicubic(*img, 61, 47);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->rgb, img->rgb);
  // A constant image stays constant at any size (weights are normalised per pixel).
  Image flat{30, 20, std::vector<uint8_t>(30 * 20 * 3, 77)};
  for (auto [w, h] : {std::pair{7, 5}, {97, 53}, {30, 3}}) {
    auto r = resize_bicubic(flat, w, h);
    ASSERT_TRUE(r.ok());
    for (uint8_t v : r->rgb) ASSERT_EQ(v, 77);
  }
  EXPECT_FALSE(resize_bicubic(flat, 0, 5).ok());
}

}  // namespace
