// SentencePiece pieces as llama.cpp's "llama" vocabulary and llama2.c's tokenizer.bin hold them:
// a space is U+2581 ("▁"), byte-fallback pieces are "<0xXX>". The helpers that read and write that
// spelling (the SentencePiece encoder, the llama2.c loader and the synthetic vocabulary use them).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kamera::spm {

inline constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

// ' ' -> "▁", optionally with a leading "▁".
std::string escape_spaces(std::string_view text, bool prefix);
// "▁" -> ' '.
std::string unescape_spaces(std::string_view piece);
// The byte of a piece spelled exactly "<0xXX>" (upper-case hex), or -1.
int byte_piece_value(std::string_view piece);
// Split into UTF-8 characters (malformed bytes become one-byte characters).
std::vector<std::string_view> split_chars(std::string_view s);
// Bytes of the UTF-8 character at p[0..n): its length when well-formed, else 1.
size_t char_len(const unsigned char* p, size_t n);

}  // namespace kamera::spm
