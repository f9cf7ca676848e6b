#include "store/disk_tier.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/log.h"

namespace kamera {

Result<std::string> directory_store_key(const std::string& dir) {
  const std::string path = dir + "/store.key";
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (key.size() < 16)
      return make_error(ErrorCode::CorruptData, "{}: a store key has at least 16 bytes", path);
    return key;
  }
  const std::string key = random_store_key();
  const std::string tmp = path + ".new";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool ok =
      fd >= 0 && ::write(fd, key.data(), key.size()) == ssize_t(key.size()) && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  // link() fails when another process made the key first: then that one is read.
  if (!ok || (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST)) {
    ::unlink(tmp.c_str());
    return make_error(ErrorCode::Io, "{}: cannot write the store key: {}", path,
                      std::strerror(errno));
  }
  ::unlink(tmp.c_str());
  return directory_store_key(dir);
}

Result<std::shared_ptr<DiskTier>> DiskTier::open(const std::string& dir, const Fingerprint& model,
                                                 const KvLayout& layout, Options opts) {
  std::error_code ec;
  for (const char* sub : {"canonical", "patch", "image"}) {
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
  if (opts.key.empty()) {
    KAMERA_ASSIGN_OR_RETURN(opts.key, directory_store_key(dir));
  }
  std::shared_ptr<DiskTier> t(new DiskTier(dir, model, layout, std::move(opts)));
  t->scan();
  return t;
}

namespace {

// "<entry>.tmp.<pid>.<n>" of a process that is gone.
bool stale_temporary(const std::string& name) {
  const size_t at = name.find(".tmp.");
  if (at == std::string::npos) return false;
  const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
  return pid <= 0 || (::kill(pid_t(pid), 0) != 0 && errno == ESRCH);
}

}  // namespace

void DiskTier::scan() {
  std::vector<std::pair<std::filesystem::file_time_type, std::string>> found;
  std::error_code ec;
  for (const char* sub : {"canonical", "patch", "image"}) {
    for (const auto& d : std::filesystem::directory_iterator(dir_ + "/" + sub, ec)) {
      const std::string path = d.path().string(), name = d.path().filename().string();
      if (name.find(".tmp.") != std::string::npos) {
        if (stale_temporary(name) && std::filesystem::remove(path, ec)) ++swept_;
        continue;
      }
      if (d.is_regular_file(ec)) found.emplace_back(d.last_write_time(ec), path);
    }
  }
  std::sort(found.begin(), found.end());  // oldest first: pushed to the front, ends at the back
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [t, path] : found)
    index_put(path, int64_t(std::filesystem::file_size(path, ec)));
  if (swept_) log().info("store: swept {} temporary files left by a crash in {}", swept_, dir_);
  evict_to_cap();
}

void DiskTier::index_put(const std::string& path, int64_t bytes) {
  index_drop(path);
  lru_.push_front(path);
  files_[path] = FileInfo{bytes, lru_.begin()};
  stats_.bytes += bytes;
}

void DiskTier::index_drop(const std::string& path) {
  auto it = files_.find(path);
  if (it == files_.end()) return;
  stats_.bytes -= it->second.bytes;
  lru_.erase(it->second.lru);
  files_.erase(it);
}

void DiskTier::index_touch(const std::string& path) {
  auto it = files_.find(path);
  if (it == files_.end()) return;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recency survives a restart
}

void DiskTier::evict_to_cap() {
  while (opts_.max_bytes > 0 && stats_.bytes > int64_t(opts_.max_bytes) && !lru_.empty()) {
    const std::string victim = lru_.back();
    std::error_code ec;
    std::filesystem::remove(victim, ec);
    index_drop(victim);
    ++stats_.evictions;
  }
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

Fetched DiskTier::read_file(const std::string& path) {
  Fetched got;
  std::ifstream f(path, std::ios::binary);
  if (!f) return got;
  got.blob.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  got.state = Fetched::State::Found;
  return got;
}

void DiskTier::discard(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  index_drop(path);
}

template <class Entry>
std::shared_ptr<const Entry> DiskTier::load(const std::string& path,
                                            const typename Sealed<Entry>::Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto got = load_sealed<Entry>(
      codec_, key, "disk", path, [&] { return read_file(path); }, [&] { discard(path); });
  got.count(stats_);
  if (got.entry) index_touch(path);
  return got.entry;
}

std::shared_ptr<const CanonicalEntry> DiskTier::load_canonical(const ChunkId& id) {
  return load<CanonicalEntry>(canonical_path(id), id);
}

std::shared_ptr<const PatchEntry> DiskTier::load_patch(const PatchKey& key) {
  return load<PatchEntry>(patch_path(key), key);
}

void DiskTier::save_blob(const std::string& path, const std::string& blob) {
  std::lock_guard<std::mutex> lock(mu_);
  if (write_atomic(path, blob)) {
    ++stats_.writes;
    index_put(path, int64_t(blob.size()));
    evict_to_cap();
  } else {
    ++stats_.errors;
    log().warn("store: cannot write {}: {}", path, std::strerror(errno));
  }
}

std::string DiskTier::image_path(const ChunkId& key) const {
  return fmt::format("{}/image/{}.kie", dir_, key.hex());
}

std::shared_ptr<const ImageEntry> DiskTier::load_image(const ChunkId& key) {
  return load<ImageEntry>(image_path(key), key);
}

void DiskTier::save_image(const ImageEntry& e) {
  save_blob(image_path(e.key), codec_.seal(e));
}

void DiskTier::save_canonical(const CanonicalEntry& e) {
  save_blob(canonical_path(e.id), codec_.seal(e));
}

void DiskTier::save_patch(const PatchEntry& e) {
  save_blob(patch_path(e.key), codec_.seal(e));
}

void DiskTier::erase_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  const std::string path = canonical_path(id);
  std::filesystem::remove(path, ec);
  index_drop(path);
}

StoreTier::Stats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kamera
