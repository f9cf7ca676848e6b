// GGUF reader (see gguf.h for the file layout).
//
// The reader never trusts a count, length or offset: each one is checked against the bytes that
// are left before anything is read or allocated, so a hostile file fails with a message instead
// of reading out of bounds or reserving gigabytes. Every message starts with the file name.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "gguf/format.h"
#include "gguf/keys.h"
#include "ops/quant_ref.h"

namespace kamera {

static_assert(std::endian::native == std::endian::little,
              "GGUF I/O here assumes a little-endian host");

using namespace gguf_format;

namespace {

// Bounds-checked little-endian reader over the file bytes. Each failing call records a message
// (without the file name) and returns false; `ctx` names the item being parsed.
class Parser {
 public:
  explicit Parser(std::span<const uint8_t> bytes) : p_(bytes.data()), size_(bytes.size()) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& error() const { return err_; }
  Error status() const { return Error{ErrorCode::CorruptData, err_}; }
  std::string ctx;

  bool fail(std::string msg) {
    err_ = ctx.empty() ? std::move(msg) : ctx + ": " + msg;
    return false;
  }

  bool read_raw(void* dst, size_t n, const char* field) {
    if (n > remaining()) {
      return fail(
          fmt::format("file truncated at byte {} while reading {} ({} bytes needed, {} left)", pos_,
                      field, n, remaining()));
    }
    std::memcpy(dst, p_ + pos_, n);
    pos_ += n;
    return true;
  }
  template <class T>
  bool read(T* v, const char* field) {
    return read_raw(v, sizeof(T), field);
  }

  bool read_string(std::string* s, const char* field) {
    const size_t at = pos_;
    uint64_t len = 0;
    if (!read(&len, field)) return false;
    if (len > remaining()) {
      return fail(fmt::format("{} at byte {} has length {}, but only {} bytes are left", field, at,
                              len, remaining()));
    }
    s->assign(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return true;
  }

  // An integer of type t widened to int64 (u64 above INT64_MAX is an error).
  bool read_int(GgufType t, int64_t* v, const char* field) {
    switch (t) {
      case GgufType::U8:
        return read_as<uint8_t>(v, field);
      case GgufType::I8:
        return read_as<int8_t>(v, field);
      case GgufType::U16:
        return read_as<uint16_t>(v, field);
      case GgufType::I16:
        return read_as<int16_t>(v, field);
      case GgufType::U32:
        return read_as<uint32_t>(v, field);
      case GgufType::I32:
        return read_as<int32_t>(v, field);
      case GgufType::I64:
        return read_as<int64_t>(v, field);
      case GgufType::U64: {
        const size_t at = pos_;
        uint64_t x = 0;
        if (!read(&x, field)) return false;
        if (x > uint64_t(std::numeric_limits<int64_t>::max())) {
          return fail(fmt::format("{} at byte {}: u64 value {} is above INT64_MAX (unsupported)",
                                  field, at, x));
        }
        *v = int64_t(x);
        return true;
      }
      default:
        return fail(
            fmt::format("{}: {} is not an integer type", field, gguf_type_name(uint32_t(t))));
    }
  }

  bool read_float(GgufType t, double* v, const char* field) {
    if (t == GgufType::F32) {
      float f = 0;
      if (!read(&f, field)) return false;
      *v = f;
      return true;
    }
    return read(v, field);
  }

  bool read_bool(bool* v, const char* field) {
    const size_t at = pos_;
    uint8_t b = 0;
    if (!read(&b, field)) return false;
    if (b > 1) return fail(fmt::format("{} at byte {}: bool value {} is not 0 or 1", field, at, b));
    *v = b != 0;
    return true;
  }

  // A value of (already read) type id `type_id`.
  bool read_value(uint32_t type_id, GgufValue* out) {
    if (type_id > kMaxGgufType) {
      return fail(fmt::format("unknown value type {} at byte {}", type_id, pos_ - 4));
    }
    const auto t = static_cast<GgufType>(type_id);
    out->type = t;
    if (is_int_type(t)) {
      int64_t v = 0;
      if (!read_int(t, &v, "value")) return false;
      out->data = v;
    } else if (is_float_type(t)) {
      double v = 0;
      if (!read_float(t, &v, "value")) return false;
      out->data = v;
    } else if (t == GgufType::BOOL) {
      bool v = false;
      if (!read_bool(&v, "value")) return false;
      out->data = v;
    } else if (t == GgufType::STRING) {
      std::string v;
      if (!read_string(&v, "string value")) return false;
      out->data = std::move(v);
    } else {
      return read_array(out);
    }
    return true;
  }

 private:
  template <class S>
  bool read_as(int64_t* v, const char* field) {
    S x{};
    if (!read(&x, field)) return false;
    *v = int64_t(x);
    return true;
  }

  bool read_array(GgufValue* out) {
    uint32_t et = 0;
    if (!read(&et, "array element type")) return false;
    if (et > kMaxGgufType) {
      return fail(fmt::format("unknown array element type {} at byte {}", et, pos_ - 4));
    }
    if (et == uint32_t(GgufType::ARRAY)) {
      return fail(fmt::format("array of arrays at byte {} is not supported", pos_ - 4));
    }
    const auto t = static_cast<GgufType>(et);
    out->array_type = t;
    const size_t at = pos_;
    uint64_t n = 0;
    if (!read(&n, "array length")) return false;
    // Each element takes at least min_value_size bytes, so a count the rest of the file cannot
    // hold is rejected before any allocation.
    if (n > remaining() / min_value_size(t)) {
      return fail(fmt::format(
          "array of {} {} elements at byte {} needs at least {} bytes per element, but only {} "
          "bytes are left",
          n, gguf_type_name(et), at, min_value_size(t), remaining()));
    }
    if (is_int_type(t) || t == GgufType::BOOL) {
      std::vector<int64_t> v;
      v.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) {
        int64_t x = 0;
        if (t == GgufType::BOOL) {
          bool b = false;
          if (!read_bool(&b, "array element")) return false;
          x = b;
        } else if (!read_int(t, &x, "array element")) {
          return false;
        }
        v.push_back(x);
      }
      out->data = std::move(v);
    } else if (is_float_type(t)) {
      std::vector<double> v;
      v.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) {
        double x = 0;
        if (!read_float(t, &x, "array element")) return false;
        v.push_back(x);
      }
      out->data = std::move(v);
    } else {  // STRING
      std::vector<std::string> v;
      v.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) {
        std::string s;
        if (!read_string(&s, "array string")) return false;
        v.push_back(std::move(s));
      }
      out->data = std::move(v);
    }
    return true;
  }

  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  std::string err_;
};

}  // namespace

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlTypeF32:
      return DType::F32;
    case kGgmlTypeF16:
      return DType::F16;
    case kGgmlTypeQ8_0:
      return DType::Q8_0;
    case kGgmlTypeBF16:
      return DType::BF16;
    default:
      return std::nullopt;
  }
}

uint32_t ggml_type_of(DType t) {
  switch (t) {
    case DType::F32:
      return kGgmlTypeF32;
    case DType::F16:
      return kGgmlTypeF16;
    case DType::BF16:
      return kGgmlTypeBF16;
    case DType::Q8_0:
      return kGgmlTypeQ8_0;
  }
  return kGgmlTypeF32;
}

// Product of ne; 0 when a dimension is < 1 or the product overflows int64 (never for tensors the
// reader produced, which are validated).
int64_t GgufTensor::n_elements() const {
  return checked_elements(ne).value_or(0);
}

namespace {

// The magic, the version and the entry counts, each count checked against the bytes left.
Status read_header(Parser& p, size_t file_size, uint32_t* version, uint64_t* n_tensors,
                   uint64_t* n_kv) {
  if (file_size == 0) return corrupt("file is empty (0 bytes), not a GGUF file");
  if (file_size < 4)
    return corrupt("file is only {} bytes, too small to be a GGUF file", file_size);
  uint8_t magic[4] = {};
  if (!p.read_raw(magic, 4, "magic")) return p.status();
  if (std::memcmp(magic, kMagic, 4) != 0) {
    return corrupt(
        "not a GGUF file: magic bytes are {:02x} {:02x} {:02x} {:02x}, expected "
        "47 47 55 46 (\"GGUF\")",
        magic[0], magic[1], magic[2], magic[3]);
  }
  if (!p.read(version, "version")) return p.status();
  if (*version != 2 && *version != 3) {
    return make_error(ErrorCode::Unsupported,
                      "unsupported GGUF version {} (kamera reads versions 2 and 3)", *version);
  }
  if (!p.read(n_tensors, "tensor count") || !p.read(n_kv, "metadata count")) return p.status();
  // Smallest possible entries: a key/value is a u64 key length, a u32 type and a 1-byte value
  // (13 bytes); a tensor description is a u64 name length, u32 n_dims, one u64 dim, u32 type and
  // u64 offset (32 bytes).
  constexpr size_t kMinKv = 13, kMinTensor = 32;
  if (*n_kv > p.remaining() / kMinKv) {
    return corrupt(
        "header declares {} metadata entries, but the {} bytes after the header "
        "can hold at most {}",
        *n_kv, p.remaining(), p.remaining() / kMinKv);
  }
  if (*n_tensors > (p.remaining() - *n_kv * kMinKv) / kMinTensor) {
    return corrupt(
        "header declares {} tensors and {} metadata entries, but the {} bytes "
        "after the header cannot hold them",
        *n_tensors, *n_kv, p.remaining());
  }
  return Status::Ok();
}

// n_kv metadata entries (key, value type, value); a key appears once.
Status read_metadata(Parser& p, uint64_t n_kv, std::map<std::string, GgufValue>* kv) {
  for (uint64_t i = 0; i < n_kv; ++i) {
    p.ctx = fmt::format("metadata entry {} (byte {})", i, p.pos());
    std::string key;
    if (!p.read_string(&key, "key")) return p.status();
    p.ctx = fmt::format("metadata key '{}'", printable(key));
    if (kv->count(key)) return corrupt("{}: duplicate key", p.ctx);
    uint32_t type = 0;
    if (!p.read(&type, "value type")) return p.status();
    GgufValue v;
    if (!p.read_value(type, &v)) return p.status();
    kv->emplace(std::move(key), std::move(v));
  }
  p.ctx.clear();
  return Status::Ok();
}

// general.alignment (a u32 power of two) when the metadata has it, else the default.
Result<uint32_t> read_alignment(const std::map<std::string, GgufValue>& kv) {
  const auto it = kv.find(gguf_key::kAlignment);
  if (it == kv.end()) return kDefaultAlignment;
  const GgufValue& v = it->second;
  if (v.type != GgufType::U32) {
    return corrupt("metadata key '{}' has type {}, expected u32", gguf_key::kAlignment,
                   gguf_type_name(uint32_t(v.type)));
  }
  const int64_t a = std::get<int64_t>(v.data);
  if (a == 0 || !std::has_single_bit(uint64_t(a))) {
    return corrupt("metadata key '{}' is {}, must be a power of two", gguf_key::kAlignment, a);
  }
  return uint32_t(a);
}

// A tensor's dimensions: 1 to 4, each >= 1, the product at most INT64_MAX; the product.
Result<int64_t> read_shape(Parser& p, std::vector<int64_t>* ne) {
  uint32_t n_dims = 0;
  if (!p.read(&n_dims, "n_dims")) return p.status();
  if (n_dims < 1 || n_dims > 4) return corrupt("{}: n_dims is {}, must be 1 to 4", p.ctx, n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t x = 0;
    if (!p.read(&x, "dimension")) return p.status();
    if (x == 0) return corrupt("{}: ne[{}] is 0, every dimension must be >= 1", p.ctx, d);
    if (x > uint64_t(std::numeric_limits<int64_t>::max())) {
      return corrupt("{}: ne[{}] = {} is above INT64_MAX", p.ctx, d, x);
    }
    ne->push_back(int64_t(x));
  }
  const std::optional<int64_t> n = checked_elements(*ne);
  if (!n) return corrupt("{}: shape {} has more than INT64_MAX elements", p.ctx, shape_string(*ne));
  return *n;
}

// One tensor description (name, shape, type, offset); its byte size must fit in the file.
Status read_tensor_info(Parser& p, size_t file_size, GgufTensor* t) {
  KAMERA_ASSIGN_OR_RETURN(const int64_t n, read_shape(p, &t->ne));
  uint32_t ggml_type = 0;
  if (!p.read(&ggml_type, "type")) return p.status();
  if (!ggml_type_is_weight(ggml_type)) {
    return make_error(ErrorCode::Unsupported,
                      "{}: ggml type {} ({}) is not supported; kamera reads {}", p.ctx, ggml_type,
                      ggml_type_name(ggml_type), weight_type_list());
  }
  t->type = GgmlType(ggml_type);
  if (const int bs = ggml_block_size(t->type); t->ne[0] % bs != 0) {
    return corrupt("{}: {} rows must be a multiple of {} values, but ne[0] is {}", p.ctx,
                   ggml_type_name(t->type), bs, t->ne[0]);
  }
  if (!p.read(&t->offset, "data offset")) return p.status();
  const unsigned __int128 nbytes = data_bytes(t->type, n);
  if (nbytes > file_size) {
    return corrupt("{}: shape {} of {} needs {} bytes, more than the file size {}", p.ctx,
                   shape_string(t->ne), ggml_type_name(t->type), uint64_t(nbytes), file_size);
  }
  t->nbytes = size_t(nbytes);
  return Status::Ok();
}

// n_tensors tensor descriptions; a name appears once.
Status read_tensor_infos(Parser& p, uint64_t n_tensors, size_t file_size,
                         std::vector<GgufTensor>* tensors, std::map<std::string, size_t>* index) {
  tensors->reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    p.ctx = fmt::format("tensor {} (byte {})", i, p.pos());
    GgufTensor t;
    if (!p.read_string(&t.name, "name")) return p.status();
    p.ctx = fmt::format("tensor '{}'", printable(t.name));
    if (index->count(t.name)) return corrupt("{}: duplicate tensor name", p.ctx);
    KAMERA_TRY(read_tensor_info(p, file_size, &t));
    index->emplace(t.name, tensors->size());
    tensors->push_back(std::move(t));
  }
  p.ctx.clear();
  return Status::Ok();
}

// Points each tensor into the data section, which starts at the first aligned byte after the
// tensor descriptions (`header_end`): offsets aligned, data inside the file.
Status locate_tensor_data(std::span<const uint8_t> bytes, size_t header_end, uint32_t alignment,
                          std::vector<GgufTensor>* tensors) {
  const uint64_t data_start = (uint64_t(header_end) + alignment - 1) / alignment * alignment;
  for (GgufTensor& t : *tensors) {
    if (t.offset % alignment != 0) {
      return corrupt("tensor '{}': data offset {} is not a multiple of the alignment {}",
                     printable(t.name), t.offset, alignment);
    }
    const unsigned __int128 begin = (unsigned __int128)data_start + t.offset;
    if (begin + t.nbytes > bytes.size()) {
      return corrupt(
          "tensor '{}': data [offset {} (file byte {}), {} bytes] runs past end of file (size {})",
          printable(t.name), t.offset,
          begin > std::numeric_limits<uint64_t>::max() ? std::string("> 2^64")
                                                       : std::to_string(uint64_t(begin)),
          t.nbytes, bytes.size());
    }
    t.data = bytes.data() + size_t(begin);
  }
  return Status::Ok();
}

}  // namespace

// Parses `bytes` into the given members of a GgufFile: header, metadata, tensor descriptions,
// then the tensors' places in the data section. Error messages come without the file-name
// prefix (the callers add it). Tensor data pointers point into `bytes`.
static Status parse_into(std::span<const uint8_t> bytes, uint32_t* version,
                         std::map<std::string, GgufValue>* kv, std::vector<GgufTensor>* tensors,
                         std::map<std::string, size_t>* index) {
  Parser p(bytes);
  uint64_t n_tensors = 0, n_kv = 0;
  KAMERA_TRY(read_header(p, bytes.size(), version, &n_tensors, &n_kv));
  KAMERA_TRY(read_metadata(p, n_kv, kv));
  KAMERA_ASSIGN_OR_RETURN(const uint32_t alignment, read_alignment(*kv));
  KAMERA_TRY(read_tensor_infos(p, n_tensors, bytes.size(), tensors, index));
  return locate_tensor_data(bytes, p.pos(), alignment, tensors);
}

Result<std::shared_ptr<const GgufFile>> GgufFile::parse(std::span<const uint8_t> bytes,
                                                        const std::string& name) {
  try {
    std::shared_ptr<GgufFile> f(new GgufFile());
    f->name_ = name;
    const Status st = parse_into(bytes, &f->version_, &f->kv_, &f->tensors_, &f->tensor_index_);
    if (!st.ok()) return with_context(st.error(), name);
    return std::shared_ptr<const GgufFile>(std::move(f));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "{}: out of memory while parsing ({} bytes)", name,
                      bytes.size());
  } catch (const std::exception& e) {
    return make_error(ErrorCode::Internal, "{}: internal error while parsing: {}", name, e.what());
  }
}

// The header (metadata and tensor infos) has been copied into the parsed values: its mapped pages
// are dropped (whole pages below the first tensor's data). They are clean pages of a read-only
// private mapping, so a later read faults them back in from the file.
static void release_header_pages(std::span<const uint8_t> bytes,
                                 const std::vector<GgufTensor>& ts) {
  const uint8_t* first = bytes.data() + bytes.size();
  for (const GgufTensor& t : ts) first = std::min(first, t.data);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t len = size_t(first - bytes.data()) / page * page;
  if (len > 0) ::madvise(const_cast<uint8_t*>(bytes.data()), len, MADV_DONTNEED);
}

Result<std::shared_ptr<const GgufFile>> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorCode::Io, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::Io, "{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::InvalidArgument, "{}: not a regular file", path);
  }
  const size_t size = size_t(st.st_size);
  if (size == 0) {
    ::close(fd);
    return parse({}, path);  // reports the empty file
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED)
    return make_error(ErrorCode::Io, "{}: mmap failed: {}", path, std::strerror(map_errno));

  std::shared_ptr<const void> owner(
      map, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  try {
    std::shared_ptr<GgufFile> f(new GgufFile());
    f->map_ = owner;
    f->name_ = path;
    const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(map), size);
    const Status st = parse_into(bytes, &f->version_, &f->kv_, &f->tensors_, &f->tensor_index_);
    if (!st.ok()) return with_context(st.error(), path);
    release_header_pages(bytes, f->tensors_);
    return std::shared_ptr<const GgufFile>(std::move(f));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "{}: out of memory while parsing ({} bytes)", path,
                      size);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::Internal, "{}: internal error while parsing: {}", path, e.what());
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !is_int_type(v->type)) return std::nullopt;
  return std::get<int64_t>(v->data);
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (is_float_type(v->type)) return std::get<double>(v->data);
  if (is_int_type(v->type)) return double(std::get<int64_t>(v->data));
  return std::nullopt;
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::BOOL) return std::nullopt;
  return std::get<bool>(v->data);
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::STRING) return std::nullopt;
  return std::get<std::string>(v->data);
}

const std::vector<std::string>* GgufFile::get_string_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::ARRAY || v->array_type != GgufType::STRING) {
    return nullptr;
  }
  return std::get_if<std::vector<std::string>>(&v->data);
}

const std::vector<double>* GgufFile::get_float_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::ARRAY || !is_float_type(v->array_type)) return nullptr;
  return std::get_if<std::vector<double>>(&v->data);
}

const std::vector<int64_t>* GgufFile::get_int_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::ARRAY || !is_int_type(v->array_type)) return nullptr;
  return std::get_if<std::vector<int64_t>>(&v->data);
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<std::vector<float>> GgufFile::read_f32(const GgufTensor& t) const {
  // Only tensors of this file are read: `t` itself, or a copy equal to the file's description.
  const GgufTensor* own = find_tensor(t.name);
  if (own == nullptr || (&t != own && (t.data != own->data || t.type != own->type ||
                                       t.ne != own->ne || t.nbytes != own->nbytes))) {
    return make_error(ErrorCode::CorruptData, "{}: tensor '{}' is not a tensor of this file", name_,
                      printable(t.name));
  }
  const int64_t n = own->n_elements();
  try {
    std::vector<float> out(static_cast<size_t>(n));
    // Rows are contiguous and whole blocks, so the tensor converts as one long row.
    quant::dequantize_row_ref(own->type, own->data, out.data(), n);
    return out;
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "{}: tensor '{}': out of memory for {} f32 values",
                      name_, printable(own->name), n);
  }
}

}  // namespace kamera
