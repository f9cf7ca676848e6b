// libFuzzer target: the llama2.c tokenizer.bin parser, then encode/decode of text taken from
// the same input. Input layout: u16 vocab size, u16 text length, text, then the tokenizer bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint16_t vocab, text_len;
  std::memcpy(&vocab, data, 2);
  std::memcpy(&text_len, data + 2, 2);
  data += 4;
  size -= 4;
  if (text_len > size) text_len = uint16_t(size);
  const std::string_view text(reinterpret_cast<const char*>(data), text_len);
  const std::string_view blob(reinterpret_cast<const char*>(data + text_len), size - text_len);
  auto tok = kamera::Tokenizer::from_llama2c_bytes(blob, vocab, "fuzz-tokenizer.bin");
  if (!tok.ok()) return 0;
  const auto ids = tok->encode(text, true);
  (void)tok->decode_all(ids);
  for (int32_t id : {-1, 0, 1, 2, int32_t(vocab), int32_t(vocab) + 5}) (void)tok->decode(1, id);
  return 0;
}
