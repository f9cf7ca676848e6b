#include "reuse/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/log.h"

namespace kamera {

Status check_canonical_fits(const CanonicalEntry& e, const KvLayout& layout) {
  const KvLayout& l = e.kv.layout;
  if (l.n_layers != layout.n_layers || l.channels.size() != layout.channels.size())
    return make_error(ErrorCode::CorruptData, "entry layout does not match the model");
  for (size_t i = 0; i < l.channels.size(); ++i)
    if (l.channels[i].width != layout.channels[i].width ||
        l.channels[i].rotated != layout.channels[i].rotated)
      return make_error(ErrorCode::CorruptData, "entry channel {} does not match the model", i);
  return Status::Ok();
}

Result<std::shared_ptr<CanonicalEntry>> decode_canonical(std::string_view blob,
                                                         const Fingerprint& fp,
                                                         const KvLayout& layout,
                                                         const ChunkId& id) {
  auto e = deserialize_canonical(blob, fp);
  if (!e.ok()) return e.error();
  KAMERA_TRY(check_canonical_fits(**e, layout));
  if (!((*e)->id == id))
    return make_error(ErrorCode::CorruptData, "entry holds chunk {}", (*e)->id.hex());
  return e;
}

Result<std::shared_ptr<PatchEntry>> decode_patch(std::string_view blob, const Fingerprint& fp,
                                                 const KvLayout& layout, const PatchKey& key) {
  auto e = deserialize_patch(blob, fp);
  if (!e.ok()) return e.error();
  KAMERA_TRY(check_patch_fits(**e, layout));
  if (!((*e)->key == key))
    return make_error(ErrorCode::CorruptData, "entry holds another patch key");
  return e;
}

Status check_patch_fits(const PatchEntry& e, const KvLayout& layout) {
  for (const PatchFactor& f : e.patch.factors) {
    if (f.layer >= layout.n_layers || f.channel >= int(layout.channels.size()))
      return make_error(ErrorCode::CorruptData, "patch factor outside the model's layers/channels");
    if (int64_t(f.col_begin) + f.cols > layout.channels[f.channel].width)
      return make_error(ErrorCode::CorruptData, "patch factor columns outside the channel");
  }
  return Status::Ok();
}

Result<std::shared_ptr<DiskTier>> DiskTier::open(const std::string& dir, const Fingerprint& model,
                                                 const KvLayout& layout) {
  std::error_code ec;
  for (const char* sub : {"canonical", "patch"}) {
    std::filesystem::create_directories(std::filesystem::path(dir) / sub, ec);
    if (ec)
      return make_error(ErrorCode::Io, "{}: cannot create the store directory: {}", dir,
                        ec.message());
  }
  // A probe write tells a read-only or full directory now rather than at the first entry.
  const std::string probe = dir + "/.kamera-probe";
  {
    std::ofstream f(probe);
    if (!f || !(f << "ok"))
      return make_error(ErrorCode::Io, "{}: the store directory is not writable", dir);
  }
  std::filesystem::remove(probe, ec);
  return std::shared_ptr<DiskTier>(new DiskTier(dir, model, layout));
}

std::string DiskTier::canonical_path(const ChunkId& id) const {
  return fmt::format("{}/canonical/{}.kce", dir_, id.hex());
}

std::string DiskTier::patch_path(const PatchKey& key) const {
  return fmt::format("{}/patch/{}.kpe", dir_, patch_key_name(key));
}

bool DiskTier::write_atomic(const std::string& path, const std::string& blob) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < blob.size()) {
    const ssize_t n = ::write(fd, blob.data() + done, blob.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    done += size_t(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself survives a crash
    ::close(dfd);
  }
  return true;
}

std::string DiskTier::read_file(const std::string& path, bool* found) {
  std::ifstream f(path, std::ios::binary);
  *found = bool(f);
  if (!f) return {};
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void DiskTier::discard(const std::string& path, const std::string& why) {
  log().warn("store: discarding {}: {}", path, why);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  ++stats_.discarded;
}

template <class Entry, class Decode>
std::shared_ptr<const Entry> DiskTier::load_entry(const std::string& path, const Decode& decode) {
  std::lock_guard<std::mutex> lock(mu_);
  bool found = false;
  const std::string blob = read_file(path, &found);
  if (!found) {
    ++stats_.misses;
    return nullptr;
  }
  auto e = decode(blob);
  if (!e.ok()) {
    discard(path, e.message());
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  return *e;
}

std::shared_ptr<const CanonicalEntry> DiskTier::load_canonical(const ChunkId& id) {
  return load_entry<CanonicalEntry>(canonical_path(id), [&](std::string_view b) {
    return decode_canonical(b, fp_, layout_, id);
  });
}

std::shared_ptr<const PatchEntry> DiskTier::load_patch(const PatchKey& key) {
  return load_entry<PatchEntry>(
      patch_path(key), [&](std::string_view b) { return decode_patch(b, fp_, layout_, key); });
}

void DiskTier::save_blob(const std::string& path, const std::string& blob) {
  std::lock_guard<std::mutex> lock(mu_);
  if (write_atomic(path, blob)) {
    ++stats_.writes;
    stats_.bytes += int64_t(blob.size());
  } else {
    ++stats_.errors;
    log().warn("store: cannot write {}: {}", path, std::strerror(errno));
  }
}

void DiskTier::save_canonical(const CanonicalEntry& e) {
  save_blob(canonical_path(e.id), serialize_canonical(e, fp_));
}

void DiskTier::save_patch(const PatchEntry& e) {
  save_blob(patch_path(e.key), serialize_patch(e, fp_));
}

void DiskTier::erase_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  std::filesystem::remove(canonical_path(id), ec);
}

StoreTier::Stats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kamera
