// GGUF v3 (ggml's model file format): a bounds-checked reader over a memory-mapped file and a
// streaming writer. Key and tensor names follow llama.cpp, so files from its converters load
// unchanged and files written here load in llama.cpp.
//
// File layout (little endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv, then n_kv
// (string key, u32 type, value), then n_tensors (string name, u32 n_dims, u64 ne[n_dims], u32
// ggml_type, u64 offset), padding to general.alignment (default 32), then tensor data; each
// tensor's offset is relative to the data start and aligned. ne[0] is the contiguous (row)
// dimension, so a PyTorch weight (out, in) has ne = {in, out} and is stored row-major as out rows
// of in values.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_type.h"
#include "core/status.h"

namespace kamera {

enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// ggml tensor type ids of the dtypes kamera reads and writes.
inline constexpr uint32_t kGgmlTypeF32 = 0;
inline constexpr uint32_t kGgmlTypeF16 = 1;
inline constexpr uint32_t kGgmlTypeQ8_0 = 8;
inline constexpr uint32_t kGgmlTypeBF16 = 30;
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
uint32_t ggml_type_of(DType t);

// A metadata value. Integers of any width are held as int64_t (u64 values above INT64_MAX are
// rejected by the reader), floats as double; arrays by element kind.
struct GgufValue {
  GgufType type = GgufType::U32;
  GgufType array_type = GgufType::U8;  // element type when type == ARRAY
  std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>,
               std::vector<std::string>>
      data;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;        // ne[0] contiguous; 1 to 4 dims
  GgmlType type = GgmlType::F32;  // one of weight_types(); rows are whole blocks
  uint64_t offset = 0;            // from the data section start
  size_t nbytes = 0;
  const uint8_t* data = nullptr;  // points into the mapped file
  int64_t n_elements() const;
};

class GgufFile {
 public:
  // Maps and parses a file. Every error message names the file and what is wrong.
  static Result<std::shared_ptr<const GgufFile>> open(const std::string& path);
  // Parses bytes the caller keeps alive (used by the fuzzer). `name` is used in messages.
  static Result<std::shared_ptr<const GgufFile>> parse(std::span<const uint8_t> bytes,
                                                       const std::string& name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;   // any integer type
  std::optional<double> get_float(const std::string& key) const;  // f32/f64 (or an integer)
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  const std::vector<std::string>* get_string_array(const std::string& key) const;
  const std::vector<double>* get_float_array(const std::string& key) const;
  const std::vector<int64_t>* get_int_array(const std::string& key) const;

  const GgufTensor* find_tensor(const std::string& name) const;
  // What keeps the mapped bytes the tensors point into alive, without the parsed metadata: a
  // model holds this, not the file, so the tokens and merges parsed here (tens of MB of strings
  // on a 150k vocabulary) are freed once it has read them. Null for parse()d bytes.
  std::shared_ptr<const void> mapping() const { return map_; }
  // Dequantizes a tensor of any weight type to f32 (row-major, ne[0] contiguous).
  Result<std::vector<float>> read_f32(const GgufTensor& t) const;

 private:
  GgufFile() = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  std::string name_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
  std::shared_ptr<const void> map_;  // the mmap when opened from a file; unmaps when last held
};

// Streaming writer: metadata and tensor descriptions first, data produced tensor by tensor at
// write() time, so a multi-GB model never sits in memory twice.
class GgufWriter {
 public:
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_u32_array(const std::string& key, const std::vector<uint32_t>& v);

  // `fill` writes the tensor's n_elements f32 values; they are converted to `type` when written.
  void add_tensor(const std::string& name, std::vector<int64_t> ne, DType type,
                  std::function<void(float* dst)> fill);
  // The same for the ggml types the writer encodes: f32, f16, bf16, q8_0 and mxfp4 (the
  // nearest-level quantizer of ops/quant_ref.h, as llama.cpp's converter writes gpt-oss experts).
  void add_tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type,
                  std::function<void(float* dst)> fill);

  // Writes to `path` via a temporary file and rename. Fails with a message on bad shapes
  // (e.g. Q8_0 rows not a multiple of 32) or I/O errors.
  Status write(const std::string& path) const;

 private:
  struct Kv {
    std::string key;
    GgufValue value;
  };
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
    std::function<void(float*)> fill;
  };
  struct Layout;  // where write() puts each tensor's data (writer.cpp)
  void set(const std::string& key, GgufValue v);
  // write()'s steps: validate and place the tensors, encode the header, stream the data.
  Result<Layout> plan_layout(const std::string& path) const;
  Result<std::string> encode_header(const std::string& path, const Layout& layout) const;
  Status write_data(std::FILE** f, const std::string& tmp, const Layout& layout) const;
  std::vector<Kv> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace kamera
