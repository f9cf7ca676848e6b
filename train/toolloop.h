// Synthetic tool-loop transcripts for the copying models (docs/SPECTRAIN.md): a system prompt, a
// user task naming files, cities, order ids and phrases, the assistant's tool calls whose JSON
// arguments copy the task's names, tool observations of several sentences, and assistant turns
// that quote the observations' key sentences verbatim. Deterministic: transcript i of a split
// depends only on (split, i).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kamera::train {

enum class LoopSplit : uint64_t { Train = 0, Test = 1 };

struct LoopMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

// One whole conversation (it ends with the assistant's final answer).
std::vector<LoopMessage> make_tool_loop(LoopSplit split, uint64_t index);

// ChatML, as the server's built-in "chatml" template renders it (with the generation prompt when
// `generation_prompt`).
std::string render_chatml(const std::vector<LoopMessage>& msgs, bool generation_prompt);

// Text of n transcripts (the vocabulary's corpus).
std::string loop_corpus(int n);

// The copying models' vocabulary: SentencePiece pieces learned on loop_corpus (byte fallback, so
// any text tokenizes), <|im_start|> and <|im_end|> as control tokens (EOS = <|im_end|>), no BOS,
// the chatml template embedded.
Result<Tokenizer::Vocab> loop_vocab(int n_vocab);

// A tokenized conversation as the server feeds it (BOS, then the rendered messages): ids, and
// per position whether it is an assistant token (the loss).
struct LoopTokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> assistant;
};
LoopTokens tokenize_loop(const Tokenizer& tok, const std::vector<LoopMessage>& msgs);

}  // namespace kamera::train
