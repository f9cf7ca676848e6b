#include "model/rerank.h"

#include <algorithm>
#include <cmath>

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

namespace gk = gguf_key;

const char* const kQwen3RerankPrompt =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
    "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that "
    "answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n";

namespace {

const char* pooling_name(int64_t t) {
  static const char* names[] = {"none", "mean", "cls", "last", "rank"};
  return t >= 0 && t < 5 ? names[t] : "unknown";
}

// Why the file's reading is no reranker ("" : it is one), given its head's row count (0: none).
std::string why_not(const GgufFile& f, const std::string& arch, Arch kind, int64_t cls_rows) {
  const int64_t pooling = f.get_int(gk::arch_key(arch, gk::kPoolingType)).value_or(0);
  if (pooling != kPoolingRank)
    return fmt::format("its pooling type is {} ({}), not 4 (rank)", pooling, pooling_name(pooling));
  if (kind != Arch::Qwen3 && kind != Arch::Qwen3Vl)
    return fmt::format("kamera ranks with qwen3 and qwen3vl rerankers, not {}", arch);
  if (cls_rows == 0) return "it has pooling type rank but no classifier head (cls.output.weight)";
  if (cls_rows < 2) return "its classifier head has one output (a softmax over it is constant)";
  return "";
}

}  // namespace

Result<RerankInfo> read_rerank_file(const std::string& path) {
  RerankInfo info;
  auto opened = GgufFile::open(path);
  if (!opened.ok()) {
    if (opened.code() != ErrorCode::CorruptData && opened.code() != ErrorCode::Unsupported)
      return opened.error();
    info.why_not = "it is not a GGUF file";
    return info;
  }
  const GgufFile& f = **opened;
  const std::string arch = f.get_string(gk::kArchitecture).value_or("");
  const std::optional<Arch> kind = arch_from_name(arch);
  const GgufTensor* cls = f.find_tensor("cls.output.weight");
  const int64_t rows = cls && cls->ne.size() == 2 ? cls->ne[1] : 0;
  const auto* labels = f.get_string_array(gk::arch_key(arch, gk::kClassifierOutputLabels));
  if (rows > 0 && labels && int64_t(labels->size()) != rows)
    return make_error(ErrorCode::CorruptData,
                      "{}: cls.output.weight has {} rows but {}.{} names {} labels", path, rows,
                      arch, gk::kClassifierOutputLabels, labels->size());
  info.why_not = kind ? why_not(f, arch, *kind, rows) : "its architecture is not one kamera runs";
  if (!info.why_not.empty()) return info;
  RerankHead h;
  KAMERA_ASSIGN_OR_RETURN(h.rows, f.read_f32(*cls));
  h.n_out = int(rows);
  if (labels) h.labels = *labels;
  const auto prompt = f.get_string(gk::kChatTemplateRerank);
  h.prompt = prompt ? *prompt : kQwen3RerankPrompt;
  if (h.prompt.find("{query}") == std::string::npos ||
      h.prompt.find("{document}") == std::string::npos) {
    info.why_not =
        fmt::format("its {} has no {{query}} or no {{document}}", gk::kChatTemplateRerank);
    return info;
  }
  info.head = std::move(h);
  return info;
}

double rerank_score(const RerankHead& h, const float* hidden, int dim) {
  std::vector<double> z(size_t(h.n_out));
  for (int o = 0; o < h.n_out; ++o) {
    const float* row = h.rows.data() + size_t(o) * size_t(dim);
    double s = 0;
    for (int j = 0; j < dim; ++j) s += double(row[j]) * hidden[j];
    z[size_t(o)] = s;
  }
  const double top = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (double v : z) sum += std::exp(v - top);
  return std::exp(z[0] - top) / sum;
}

}  // namespace kamera
