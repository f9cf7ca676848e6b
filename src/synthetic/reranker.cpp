#include "synthetic/reranker.h"

#include <algorithm>
#include <cstring>

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "model/rerank.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

int32_t piece_id(const Vocab& v, const std::string& piece) {
  const auto it = std::find(v.pieces.begin(), v.pieces.end(), piece);
  return it == v.pieces.end() ? -1 : int32_t(it - v.pieces.begin());
}

}  // namespace

void add_rerank_labels(Vocab& v, size_t skip) {
  if (piece_id(v, "yes") >= 0 && piece_id(v, "no") >= 0) return;
  const size_t n = v.pieces.size();
  if (n < 300 + skip + 2) return;  // too small: write_reranker_gguf names the missing piece
  const char* labels[] = {"yes", "no"};
  for (size_t i = 0; i < 2; ++i) {
    const size_t at = n - skip - 2 + i;
    v.pieces[at] = labels[i];
    v.types[at] = TokenType::Normal;
  }
}

Status write_reranker_gguf(const ModelConfig& c, const std::string& model_name, DType weight_type,
                           const Vocab& v, const TensorFill& fill, const std::string& path) {
  if (c.arch != Arch::Qwen3)
    return make_error(ErrorCode::InvalidArgument,
                      "make-model --reranker: Qwen3-Reranker is a qwen3 model (not {})",
                      arch_name(c.arch));
  const int32_t yes = piece_id(v, "yes"), no = piece_id(v, "no");
  if (yes < 0 || no < 0)
    return make_error(ErrorCode::InvalidArgument,
                      "make-model --reranker: the vocabulary has no token \"{}\"",
                      yes < 0 ? "yes" : "no");
  // The head the rows come from; the file keeps the embedding only (the converter drops lm_head).
  const std::string head = c.tied_output ? "token_embd.weight" : "output.weight";
  ModelConfig file_cfg = c;
  file_cfg.tied_output = true;
  const int64_t d = c.dim, V = c.n_vocab;
  auto extra = [&](GgufWriter& w) {
    const std::string a = arch_name(c.arch);
    w.set_u32(gk::arch_key(a, gk::kPoolingType), uint32_t(kPoolingRank));
    w.set_string_array(gk::arch_key(a, gk::kClassifierOutputLabels), {"yes", "no"});
    w.set_string(gk::kChatTemplateRerank, kQwen3RerankPrompt);
    w.set_string_array(gk::kChatTemplates, {"rerank"});
    w.add_tensor("cls.output.weight", {d, 2}, weight_type, [=, &fill](float* dst) {
      std::vector<float> all(size_t(V * d));
      fill(head, {d, V}, all.data());
      std::memcpy(dst, all.data() + size_t(yes) * size_t(d), size_t(d) * sizeof(float));
      std::memcpy(dst + d, all.data() + size_t(no) * size_t(d), size_t(d) * sizeof(float));
    });
  };
  return write_decoder_gguf(file_cfg, model_name, weight_type, v, fill, path, extra);
}

}  // namespace kamera
