// Prompt-lookup drafting for speculative decoding: the tokens that followed the latest earlier
// occurrence of the context's last n tokens (n from n_max down to n_min) are proposed as the
// next ones. Agents' outputs copy much from their context (tool arguments, quoted observations,
// code), where such drafts are accepted several tokens at a time at no model cost; the model
// checks every draft (serve/scheduler: one forward with logits on each drafted position).
//
// The draft length adapts to the acceptance: it doubles (up to k_max) while whole drafts are
// accepted, and falls to one more than what was accepted when a draft is cut. A draft rejected
// whole makes the drafter wait before the next one: 1, 2, 4, ... up to backoff_max steps after
// consecutive whole rejections (none after any accepted token), so text that does not copy (where
// short suffixes still recur by chance) pays for few checked drafts.
//
//   NgramDrafter d(prompt_ids);
//   d.sync(gen.tokens());              // the output so far
//   std::vector<int32_t> x = d.draft(d.length());
//   ... verify x ...; d.feedback(x.size(), accepted);
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace kamera {

struct NgramParams {
  int n_max = 3;  // the longest suffix looked up
  int n_min = 1;  // the shortest
  int k_max = 8;  // the longest draft
  int k_start = 4;
  int backoff_max = 16;
};

class NgramDrafter {
 public:
  // `context`: the prompt's tokens (negative ids, e.g. image rows, never match nor get proposed).
  explicit NgramDrafter(std::span<const int32_t> context, NgramParams p = {});

  // Appends the output tokens not seen yet: `output` is the whole output so far.
  void sync(std::span<const int32_t> output);
  // Up to k tokens that followed the latest earlier occurrence of the longest suffix found (n_max
  // tokens down to n_min); empty when none occurs before, or while waiting after rejections (each
  // call is a step).
  std::vector<int32_t> draft(int k);
  // The draft length to ask for now (adapted to the acceptance).
  int length() const { return k_; }
  // The last draft's length and how many of its tokens were accepted.
  void feedback(int drafted, int accepted);

 private:
  void push(int32_t token);
  uint64_t key(size_t end, int n) const;  // the n tokens before `end`
  bool same(size_t a, size_t b, int n) const;

  NgramParams p_;
  std::vector<int32_t> ctx_;
  size_t prompt_ = 0;  // tokens of ctx_ that are the prompt
  // Per n (index n - 1): the n tokens' key -> the index after their latest occurrence that has a
  // token after it.
  std::vector<std::unordered_map<uint64_t, uint32_t>> last_;
  int k_;
  int backoff_ = 0, wait_ = 0;  // steps to wait after the next whole rejection; left to wait
};

}  // namespace kamera
