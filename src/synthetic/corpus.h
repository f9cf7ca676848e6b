// An embedded English corpus (~4 KB of plain, original children's-story text) for learning
// synthetic vocabularies with build_synthetic_vocab, so that synthetic models tokenize ordinary
// English prompts into word-like pieces.
#pragma once

#include <string_view>

namespace kamera {

std::string_view synthetic_vocab_corpus();

}  // namespace kamera
