// GGUF writer (see gguf.h for the file layout): the header and tensors streamed to a temporary
// file, then renamed into place.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "gguf/format.h"
#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "ops/quant_ref.h"

namespace kamera {

using namespace gguf_format;

void GgufWriter::set(const std::string& key, GgufValue v) {
  for (Kv& kv : kv_) {
    if (kv.key == key) {
      kv.value = std::move(v);
      return;
    }
  }
  kv_.push_back(Kv{key, std::move(v)});
}

void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  set(key, GgufValue{GgufType::U32, GgufType::U8, int64_t(v)});
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  set(key, GgufValue{GgufType::I32, GgufType::U8, int64_t(v)});
}
// Values above INT64_MAX are stored wrapped and rejected by write(): the reader could not load
// them.
void GgufWriter::set_u64(const std::string& key, uint64_t v) {
  set(key, GgufValue{GgufType::U64, GgufType::U8, static_cast<int64_t>(v)});
}
void GgufWriter::set_f32(const std::string& key, float v) {
  set(key, GgufValue{GgufType::F32, GgufType::U8, double(v)});
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  set(key, GgufValue{GgufType::BOOL, GgufType::U8, v});
}
void GgufWriter::set_string(const std::string& key, const std::string& v) {
  set(key, GgufValue{GgufType::STRING, GgufType::U8, v});
}
void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, GgufValue{GgufType::ARRAY, GgufType::STRING, v});
}
void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, GgufValue{GgufType::ARRAY, GgufType::F32, std::vector<double>(v.begin(), v.end())});
}
void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set(key, GgufValue{GgufType::ARRAY, GgufType::I32, std::vector<int64_t>(v.begin(), v.end())});
}
void GgufWriter::set_u32_array(const std::string& key, const std::vector<uint32_t>& v) {
  set(key, GgufValue{GgufType::ARRAY, GgufType::U32, std::vector<int64_t>(v.begin(), v.end())});
}

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> ne, DType type,
                            std::function<void(float* dst)> fill) {
  add_tensor(name, std::move(ne), ggml_type_from_dtype(type), std::move(fill));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type,
                            std::function<void(float* dst)> fill) {
  tensors_.push_back(PendingTensor{name, std::move(ne), type, std::move(fill)});
}

namespace {

// Little-endian byte sink for the header.
struct Bytes {
  std::string s;
  template <class T>
  void put(T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& v) {
    put<uint64_t>(v.size());
    s += v;
  }
  void pad_to(size_t alignment) { s.resize((s.size() + alignment - 1) / alignment * alignment); }
};

// Appends integer (or bool) v as scalar type t, little endian.
void put_int(Bytes* b, GgufType t, int64_t v) {
  switch (t) {
    case GgufType::U8:
      b->put<uint8_t>(uint8_t(v));
      break;
    case GgufType::I8:
      b->put<int8_t>(int8_t(v));
      break;
    case GgufType::U16:
      b->put<uint16_t>(uint16_t(v));
      break;
    case GgufType::I16:
      b->put<int16_t>(int16_t(v));
      break;
    case GgufType::U32:
      b->put<uint32_t>(uint32_t(v));
      break;
    case GgufType::I32:
      b->put<int32_t>(int32_t(v));
      break;
    case GgufType::U64:
      b->put<uint64_t>(uint64_t(v));
      break;
    case GgufType::I64:
      b->put<int64_t>(v);
      break;
    case GgufType::BOOL:
      b->put<uint8_t>(v != 0);
      break;
    default:
      break;
  }
}
void put_float(Bytes* b, GgufType t, double v) {
  if (t == GgufType::F32) {
    b->put<float>(float(v));
  } else {
    b->put<double>(v);
  }
}

// Serializes key `key` = v; fails with what is wrong with the value.
Status put_kv(Bytes* b, const std::string& key, const GgufValue& v) {
  b->str(key);
  b->put<uint32_t>(uint32_t(v.type));
  if (is_int_type(v.type)) {
    const int64_t* x = std::get_if<int64_t>(&v.data);
    if (x == nullptr) return bad_value("integer value holds no integer");
    if (v.type == GgufType::U64 && *x < 0) {
      return bad_value("u64 value {} is above INT64_MAX, which GGUF readers here reject",
                       uint64_t(*x));
    }
    put_int(b, v.type, *x);
  } else if (is_float_type(v.type)) {
    const double* x = std::get_if<double>(&v.data);
    if (x == nullptr) return bad_value("float value holds no float");
    put_float(b, v.type, *x);
  } else if (v.type == GgufType::BOOL) {
    const bool* x = std::get_if<bool>(&v.data);
    if (x == nullptr) return bad_value("bool value holds no bool");
    b->put<uint8_t>(*x ? 1 : 0);
  } else if (v.type == GgufType::STRING) {
    const std::string* x = std::get_if<std::string>(&v.data);
    if (x == nullptr) return bad_value("string value holds no string");
    b->str(*x);
  } else if (v.type == GgufType::ARRAY) {
    b->put<uint32_t>(uint32_t(v.array_type));
    if (is_int_type(v.array_type) || v.array_type == GgufType::BOOL) {
      const auto* x = std::get_if<std::vector<int64_t>>(&v.data);
      if (x == nullptr) return bad_value("integer array holds no integers");
      b->put<uint64_t>(x->size());
      for (int64_t e : *x) put_int(b, v.array_type, e);
    } else if (is_float_type(v.array_type)) {
      const auto* x = std::get_if<std::vector<double>>(&v.data);
      if (x == nullptr) return bad_value("float array holds no floats");
      b->put<uint64_t>(x->size());
      for (double e : *x) put_float(b, v.array_type, e);
    } else if (v.array_type == GgufType::STRING) {
      const auto* x = std::get_if<std::vector<std::string>>(&v.data);
      if (x == nullptr) return bad_value("string array holds no strings");
      b->put<uint64_t>(x->size());
      for (const std::string& e : *x) b->str(e);
    } else {
      return bad_value("arrays of {} are not supported", gguf_type_name(uint32_t(v.array_type)));
    }
  } else {
    return bad_value("unknown value type {}", uint32_t(v.type));
  }
  return Status::Ok();
}

// Closes and removes a partly written temporary file (nothing when it was not created).
void discard(std::FILE* f, const std::string& tmp) {
  if (f == nullptr) return;
  std::fclose(f);
  std::remove(tmp.c_str());
}

// The error of a failed `what` on the temporary file, which is closed and removed.
Error io_failure(std::FILE** f, const std::string& tmp, const char* what) {
  const int e = errno;
  discard(*f, tmp);
  *f = nullptr;
  return make_error(ErrorCode::Io, "{}: {} failed: {}", tmp, what, std::strerror(e));
}

bool write_bytes(std::FILE* f, const void* p, size_t n) {
  return n == 0 || std::fwrite(p, 1, n, f) == n;
}

// The file is written beside its destination and renamed over it: the destination must be a
// regular file or not exist (renaming over /dev/null or a directory would replace it).
Status check_replaceable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return make_error(ErrorCode::InvalidArgument,
                      "{}: exists and is not a regular file; refusing to replace it", path);
  return Status::Ok();
}

// A temporary name unique to this process and call: concurrent writers of the same path (e.g.
// parallel tests) never share a temporary file; the last rename wins, each complete.
std::string temporary_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
}

// The value of general.alignment: a u32 power of two.
Result<uint32_t> checked_alignment(const std::string& path, const GgufValue& v) {
  const int64_t* a = std::get_if<int64_t>(&v.data);
  if (v.type != GgufType::U32 || a == nullptr || *a == 0 || !std::has_single_bit(uint64_t(*a)))
    return make_error(ErrorCode::InvalidArgument, "{}: {} must be a u32 power of two", path,
                      gguf_key::kAlignment);
  return uint32_t(*a);
}

// A tensor's name (new in `names`), shape, type and fill function; its element count.
Result<int64_t> checked_tensor(const std::string& path, const std::string& name,
                               const std::vector<int64_t>& ne, GgmlType type, bool has_fill,
                               std::set<std::string>* names) {
  const std::string tn = printable(name);
  if (name.empty() || name.size() >= kGgmlMaxName)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: tensor '{}': name must be 1 to {} bytes (ggml's limit)", path, tn,
                      kGgmlMaxName - 1);
  if (!names->insert(name).second)
    return make_error(ErrorCode::InvalidArgument, "{}: tensor '{}': duplicate tensor name", path,
                      tn);
  if (ne.empty() || ne.size() > 4)
    return make_error(ErrorCode::InvalidArgument, "{}: tensor '{}': {} dimensions, must be 1 to 4",
                      path, tn, ne.size());
  const std::optional<int64_t> n = checked_elements(ne);
  if (!n)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: tensor '{}': bad shape {} (every dimension >= 1, at most INT64_MAX "
                      "elements)",
                      path, tn, shape_string(ne));
  if (type != GgmlType::MXFP4 && !dtype_from_ggml(uint32_t(type)))
    return make_error(ErrorCode::InvalidArgument,
                      "{}: tensor '{}': the writer encodes f32, f16, bf16, q8_0 and mxfp4, not {}",
                      path, tn, ggml_type_name(type));
  if (!ggml_row_bytes(type, ne[0]))
    return make_error(ErrorCode::InvalidArgument,
                      "{}: tensor '{}': {} rows must be a multiple of {} values, but ne[0] is {}",
                      path, tn, ggml_type_name(type), ggml_block_size(type), ne[0]);
  if (!has_fill)
    return make_error(ErrorCode::InvalidArgument, "{}: tensor '{}': no fill function", path, tn);
  return *n;
}

// Converts rows of `row` f32 values to `type` a chunk of rows (about 1 MiB) at a time and writes
// them; false when a write fails.
bool write_rows(std::FILE* f, GgmlType type, const std::vector<float>& values, int64_t row,
                std::vector<uint8_t>* chunk) {
  const size_t row_bytes = *ggml_row_bytes(type, row);
  const std::optional<DType> dtype = dtype_from_ggml(uint32_t(type));  // else mxfp4
  const int64_t rows = int64_t(values.size()) / row;
  const int64_t rows_per_chunk = std::max<int64_t>(1, int64_t((1u << 20) / row_bytes));
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
    const int64_t nr = std::min(rows_per_chunk, rows - r0);
    chunk->resize(size_t(nr) * row_bytes);
    for (int64_t r = 0; r < nr; ++r) {
      const float* src = values.data() + (r0 + r) * row;
      uint8_t* dst = chunk->data() + size_t(r) * row_bytes;
      if (dtype)
        quantize_row(*dtype, src, dst, row);
      else
        quant::quantize_mxfp4_ref(src, dst, row);
    }
    if (!write_bytes(f, chunk->data(), chunk->size())) return false;
  }
  return true;
}

// Flushes, syncs and closes the temporary file, then renames it over `path`.
Status commit(std::FILE** f, const std::string& tmp, const std::string& path) {
  if (std::fflush(*f) != 0) return io_failure(f, tmp, "flush");
  if (::fsync(::fileno(*f)) != 0) return io_failure(f, tmp, "fsync");
  const int rc = std::fclose(*f);
  *f = nullptr;
  if (rc != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return make_error(ErrorCode::Io, "{}: close failed: {}", tmp, std::strerror(e));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return make_error(ErrorCode::Io, "{}: cannot rename {} to it: {}", path, tmp, std::strerror(e));
  }
  return Status::Ok();
}

}  // namespace

// Where each tensor's data goes: offsets from the data section's start, each tensor padded to
// the alignment.
struct GgufWriter::Layout {
  uint32_t alignment = kDefaultAlignment;
  std::vector<uint64_t> offsets, nbytes;
};

// Validates the metadata's alignment and every tensor before the first byte is written.
Result<GgufWriter::Layout> GgufWriter::plan_layout(const std::string& path) const {
  Layout l;
  for (const Kv& kv : kv_) {
    if (kv.key != gguf_key::kAlignment) continue;
    KAMERA_ASSIGN_OR_RETURN(l.alignment, checked_alignment(path, kv.value));
  }
  std::set<std::string> names;
  uint64_t data_size = 0;  // bytes of the data section, each tensor padded to the alignment
  for (const PendingTensor& t : tensors_) {
    KAMERA_ASSIGN_OR_RETURN(const int64_t n,
                            checked_tensor(path, t.name, t.ne, t.type, bool(t.fill), &names));
    const unsigned __int128 nb = data_bytes(t.type, n);
    const unsigned __int128 padded = (nb + l.alignment - 1) / l.alignment * l.alignment;
    if (nb > uint64_t(std::numeric_limits<int64_t>::max()) ||
        data_size + padded > uint64_t(std::numeric_limits<int64_t>::max()))
      return make_error(ErrorCode::InvalidArgument,
                        "{}: tensor '{}': shape {} is too large to write", path, printable(t.name),
                        shape_string(t.ne));
    l.offsets.push_back(data_size);
    l.nbytes.push_back(uint64_t(nb));
    data_size += uint64_t(padded);
  }
  return l;
}

// Magic, version, counts, the metadata in insertion order, the tensor descriptions, padding.
Result<std::string> GgufWriter::encode_header(const std::string& path, const Layout& l) const {
  Bytes h;
  h.s.append(reinterpret_cast<const char*>(kMagic), 4);
  h.put<uint32_t>(3);
  h.put<uint64_t>(tensors_.size());
  h.put<uint64_t>(kv_.size());
  for (const Kv& kv : kv_) {
    const Status st = put_kv(&h, kv.key, kv.value);
    if (!st.ok())
      return with_context(st.error(),
                          fmt::format("{}: metadata key '{}'", path, printable(kv.key)));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const PendingTensor& t = tensors_[i];
    h.str(t.name);
    h.put<uint32_t>(uint32_t(t.ne.size()));
    for (int64_t d : t.ne) h.put<uint64_t>(uint64_t(d));
    h.put<uint32_t>(uint32_t(t.type));
    h.put<uint64_t>(l.offsets[i]);
  }
  h.pad_to(l.alignment);
  return std::move(h.s);
}

// Each tensor filled as f32, converted and written, then padded to the alignment.
Status GgufWriter::write_data(std::FILE** f, const std::string& tmp, const Layout& l) const {
  std::vector<float> values;
  std::vector<uint8_t> chunk;
  const std::vector<uint8_t> zeros(l.alignment, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const PendingTensor& t = tensors_[i];
    values.assign(size_t(*checked_elements(t.ne)), 0.0f);
    t.fill(values.data());
    if (!write_rows(*f, t.type, values, t.ne[0], &chunk)) return io_failure(f, tmp, "write");
    const size_t pad = size_t((l.alignment - l.nbytes[i] % l.alignment) % l.alignment);
    if (!write_bytes(*f, zeros.data(), pad)) return io_failure(f, tmp, "write");
  }
  return Status::Ok();
}

Status GgufWriter::write(const std::string& path) const {
  KAMERA_TRY(check_replaceable(path));
  const std::string tmp = temporary_name(path);
  std::FILE* f = nullptr;
  try {
    KAMERA_ASSIGN_OR_RETURN(const Layout layout, plan_layout(path));
    KAMERA_ASSIGN_OR_RETURN(const std::string header, encode_header(path, layout));
    f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr)
      return make_error(ErrorCode::Io, "{}: cannot create: {}", tmp, std::strerror(errno));
    if (!write_bytes(f, header.data(), header.size())) return io_failure(&f, tmp, "write");
    KAMERA_TRY(write_data(&f, tmp, layout));
    return commit(&f, tmp, path);
  } catch (const std::bad_alloc&) {
    discard(f, tmp);
    return make_error(ErrorCode::OutOfMemory, "{}: out of memory while writing", path);
  } catch (const std::exception& e) {
    discard(f, tmp);
    return make_error(ErrorCode::Io, "{}: error while writing: {}", path, e.what());
  } catch (...) {  // a fill callback threw something else
    discard(f, tmp);
    return make_error(ErrorCode::Io, "{}: unknown exception while writing", path);
  }
}

}  // namespace kamera
