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

#include "core/log.h"

namespace kamera {

namespace {

const char* not_a_file(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a regular file";
}

// Whether a regular file has a hole before its end (this tier never writes one). Moves the file
// offset: read with pread.
bool has_holes(int fd, off_t size) {
  const off_t hole = ::lseek(fd, 0, SEEK_HOLE);
  return hole >= 0 && hole < size;
}

bool read_all(int fd, std::string& out, size_t n) {
  out.resize(n);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, out.data() + done, n - done, off_t(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;  // shorter than fstat said: the codec tells
    done += size_t(r);
  }
  out.resize(done);
  return true;
}

Fetched refused(std::string why) {
  Fetched f;
  f.state = Fetched::State::Refused;
  f.why = std::move(why);
  return f;
}

Fetched io_error(const char* what) {
  Fetched f;
  f.error = true;
  f.why = fmt::format("{}: {}", what, std::strerror(errno));
  return f;
}

bool is_tombstoned_file(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

Fetched read_untrusted(const std::string& path, size_t limit, bool follow_links) {
  const int fd = ::open(
      path.c_str(), O_RDONLY | (follow_links ? 0 : O_NOFOLLOW) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    if (errno == ELOOP) return refused("a symbolic link, not an entry");
    if (errno == ENXIO) return refused("a socket, not an entry");
    return io_error("open");
  }
  struct stat st {};
  Fetched f;
  if (::fstat(fd, &st) != 0) {
    f = io_error("fstat");
  } else if (!S_ISREG(st.st_mode)) {
    f = refused(fmt::format("{}, not an entry", not_a_file(st.st_mode)));
  } else if (uint64_t(st.st_size) > limit) {
    f = refused(fmt::format("{} bytes, over the entry size limit of {}", st.st_size, limit));
  } else if (has_holes(fd, st.st_size)) {
    f = refused(
        fmt::format("a sparse file ({} bytes with holes), not written by this tier", st.st_size));
  } else if (!read_all(fd, f.blob, size_t(st.st_size))) {
    f = io_error("read");
  } else {
    f.state = Fetched::State::Found;
  }
  ::close(fd);
  return f;
}

namespace {

// Every byte of `blob` to `fd` (a short write past a file-size limit or on a full disk is
// followed by the failing one: EFBIG, ENOSPC).
bool write_whole(int fd, const std::string& blob) {
  size_t done = 0;
  while (done < blob.size()) {
    const ssize_t n = ::write(fd, blob.data() + done, blob.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

bool fsync_parent(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return false;
  const bool ok = ::fsync(dfd) == 0;
  ::close(dfd);
  return ok;
}

// Temporary file, fsync, rename, fsync of the directory; the temporary never follows a link.
// True only when all of it succeeded; otherwise nothing is left at `path` nor in the temporary
// (errno tells why).
bool write_atomic(const std::string& path, const std::string& blob) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = write_whole(fd, blob) && ::fsync(fd) == 0;
  const int write_err = errno;
  // close() may report a failed write too (some file systems)
  if (::close(fd) != 0 || !written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = written ? errno : write_err;
    ::unlink(tmp.c_str());
    errno = err;
    return false;
  }
  if (!fsync_parent(path)) {  // the rename might not survive a crash: take it back
    const int err = errno;
    ::unlink(path.c_str());
    fsync_parent(path);
    errno = err;
    return false;
  }
  return true;
}

// "<entry>.tmp.<pid>.<n>" of a process that is gone.
bool stale_temporary(const std::string& name) {
  const size_t at = name.find(".tmp.");
  if (at == std::string::npos) return false;
  const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
  return pid <= 0 || (::kill(pid_t(pid), 0) != 0 && errno == ESRCH);
}

constexpr const char* kFolders[] = {"canonical", "patch", "image", "tombstone", "link"};

}  // namespace

Result<std::string> directory_store_key(const std::string& dir) {
  const std::string path = dir + "/store.key";
  const Fetched got = read_untrusted(path, 4096, true);  // a key may be linked from elsewhere
  if (got.state == Fetched::State::Refused || got.error)
    return make_error(ErrorCode::Io, "{}: cannot read the store key: {}", path, got.why);
  if (got.state == Fetched::State::Found) {
    if (got.blob.size() < 16)
      return make_error(ErrorCode::CorruptData, "{}: a store key has at least 16 bytes", path);
    return got.blob;
  }
  const std::string key = random_store_key();
  const std::string tmp = path + ".new";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
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
  for (const char* sub : kFolders) {
    std::filesystem::create_directories(std::filesystem::path(dir) / sub, ec);
    if (ec)
      return make_error(ErrorCode::Io, "{}: cannot create the store directory: {}", dir,
                        ec.message());
  }
  // A probe write tells a read-only or full directory now rather than at the first entry.
  if (!write_atomic(fmt::format("{}/.kamera-probe.{}", dir, ::getpid()), "ok"))
    return make_error(ErrorCode::Io, "{}: the store directory is not writable: {}", dir,
                      std::strerror(errno));
  std::filesystem::remove(fmt::format("{}/.kamera-probe.{}", dir, ::getpid()), ec);
  if (opts.key.empty()) {
    KAMERA_ASSIGN_OR_RETURN(opts.key, directory_store_key(dir));
  }
  std::shared_ptr<DiskTier> t(new DiskTier(dir, model, layout, std::move(opts)));
  t->scan();
  return t;
}

void DiskTier::scan_folder(const char* sub, std::vector<std::pair<int64_t, std::string>>* found) {
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(dir_ + "/" + sub, ec)) {
    std::string path = d.path().string();
    const std::string name = d.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) {
      if (stale_temporary(name) && std::filesystem::remove(path, ec)) ++swept_;
      continue;
    }
    // tombstones and links are not entries; anything not a regular file is discarded on use
    if (!found || !std::filesystem::is_regular_file(d.symlink_status(ec))) continue;
    if (std::string_view(sub) == "patch" && name.find('.') == 32 && name.size() == 36)
      path = migrate_patch(path);  // "<key>.kpe", named before patches carried their chunk
    struct stat st {};
    if (path.empty() || ::lstat(path.c_str(), &st) != 0) continue;
    found->emplace_back(int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, path);
  }
}

std::string DiskTier::migrate_patch(const std::string& path) {
  const Fetched f = read_untrusted(path, codec_.max_entry_bytes());
  auto e = deserialize_patch(f.blob, codec_.fingerprint(), codec_.key());
  std::error_code ec;
  if (!e.ok() || f.state != Fetched::State::Found) {
    std::filesystem::remove(path, ec);  // not servable either way
    return "";
  }
  const std::string to = patch_path((*e)->key);
  std::filesystem::rename(path, to, ec);
  return ec ? "" : to;
}

void DiskTier::expire_tombstones() {
  const auto now = std::filesystem::file_time_type::clock::now();
  const auto ttl = std::chrono::seconds(std::max(1, opts_.tombstone_ttl_s));
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(dir_ + "/tombstone", ec)) {
    const auto t = d.last_write_time(ec);
    if (!ec && now - t > ttl) std::filesystem::remove(d.path(), ec);
  }
  // a link whose image is gone (evicted) links nothing
  for (const auto& d : std::filesystem::directory_iterator(dir_ + "/link", ec)) {
    const std::string name = d.path().filename().string();
    const size_t dot = name.find('.');
    if (dot != std::string::npos && name.find(".tmp.") == std::string::npos &&
        !std::filesystem::exists(fmt::format("{}/image/{}.kie", dir_, name.substr(dot + 1)), ec))
      std::filesystem::remove(d.path(), ec);
  }
}

void DiskTier::scan() {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const char* sub : kFolders) {
    const bool entries = std::string_view(sub) != "tombstone" && std::string_view(sub) != "link";
    scan_folder(sub, entries ? &found : nullptr);
  }
  expire_tombstones();
  std::sort(found.begin(), found.end());  // oldest first: pushed to the front, ends at the back
  std::vector<std::string> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::error_code ec;
    for (const auto& [t, path] : found)
      index_put(path, int64_t(std::filesystem::file_size(path, ec)));
    victims = evict_to_cap();
  }
  remove_files(victims);
  if (swept_) log().info("store: swept {} temporary files left by a crash in {}", swept_, dir_);
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

bool DiskTier::index_touch(const std::string& path) {
  auto it = files_.find(path);
  if (it == files_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return true;
}

std::vector<std::string> DiskTier::evict_to_cap() {
  std::vector<std::string> victims;
  while (opts_.max_bytes > 0 && stats_.bytes > int64_t(opts_.max_bytes) && !lru_.empty()) {
    victims.push_back(lru_.back());
    index_drop(lru_.back());
    ++stats_.evictions;
  }
  return victims;
}

void DiskTier::remove_files(const std::vector<std::string>& paths) {
  std::error_code ec;
  for (const std::string& p : paths) std::filesystem::remove(p, ec);
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& p : paths) index_drop(p);
}

std::string DiskTier::canonical_path(const ChunkId& id) const {
  return fmt::format("{}/canonical/{}.kce", dir_, id.hex());
}

std::string DiskTier::patch_path(const PatchKey& key) const {
  return fmt::format("{}/patch/{}.{}.kpe", dir_, key.chunk.hex(), patch_key_name(key));
}

std::string DiskTier::image_path(const ChunkId& key) const {
  return fmt::format("{}/image/{}.kie", dir_, key.hex());
}

std::string DiskTier::tombstone_path(const ChunkId& id) const {
  return fmt::format("{}/tombstone/{}", dir_, id.hex());
}

void DiskTier::discard(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);  // a file, a link or an empty directory
  if (ec) log().warn("store: cannot remove {}: {}", path, ec.message());
  std::lock_guard<std::mutex> lock(mu_);
  index_drop(path);
}

template <class Entry>
std::shared_ptr<const Entry> DiskTier::load(const std::string& path,
                                            const typename Sealed<Entry>::Key& key,
                                            const ChunkId* chunk) {
  if (chunk && tombstoned(*chunk)) {  // what a delete left behind is never served
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    return nullptr;
  }
  auto got = load_sealed<Entry>(
      codec_, key, "disk", path, [&] { return read_untrusted(path, codec_.max_entry_bytes()); },
      [&] { discard(path); });
  bool touch = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    got.count(stats_);
    touch = got.entry && index_touch(path);
  }
  if (touch) ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // for a restart
  return got.entry;
}

std::shared_ptr<const CanonicalEntry> DiskTier::load_canonical(const ChunkId& id) {
  return load<CanonicalEntry>(canonical_path(id), id, &id);
}

std::shared_ptr<const PatchEntry> DiskTier::load_patch(const PatchKey& key) {
  return load<PatchEntry>(patch_path(key), key, &key.chunk);
}

std::shared_ptr<const ImageEntry> DiskTier::load_image(const ChunkId& key) {
  return load<ImageEntry>(image_path(key), key, nullptr);
}

bool DiskTier::tombstoned(const ChunkId& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tombs_.count(id)) return true;
  }
  return is_tombstoned_file(tombstone_path(id));  // another process's delete
}

bool DiskTier::save_blob(const std::string& path, const std::string& blob, const ChunkId* chunk) {
  if (chunk && tombstoned(*chunk)) return true;  // deleted: an in-flight write-back is dropped
  if (!write_atomic(path, blob)) {
    const int err = errno;
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.errors;
    last_error_ = std::strerror(err);
    log().warn("store: cannot write {}: {}", path, last_error_);
    return false;
  }
  // Checked again after the rename: a delete that wrote its tombstone before this check removes
  // the file itself after it, and one that wrote it later is seen here.
  bool gone = chunk && is_tombstoned_file(tombstone_path(*chunk));
  std::vector<std::string> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone = gone || (chunk && tombs_.count(*chunk));
    if (!gone) {
      ++stats_.writes;
      index_put(path, int64_t(blob.size()));
      victims = evict_to_cap();
    }
  }
  if (gone) victims.push_back(path);
  remove_files(victims);
  // An entry larger than the tier's cap is evicted at once: not held.
  return gone || std::find(victims.begin(), victims.end(), path) == victims.end();
}

bool DiskTier::save_canonical(const CanonicalEntry& e) {
  return save_blob(canonical_path(e.id), codec_.seal(e), &e.id);
}

void DiskTier::save_patch(const PatchEntry& e) {
  save_blob(patch_path(e.key), codec_.seal(e), &e.key.chunk);
}

void DiskTier::save_image(const ImageEntry& e) {
  save_blob(image_path(e.key), codec_.seal(e), nullptr);
}

std::vector<std::string> DiskTier::files_of(const char* sub, const ChunkId& chunk, bool* ok) const {
  std::vector<std::string> out;
  const std::string prefix = chunk.hex() + ".";
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(dir_ + "/" + sub, ec)) {
    const std::string name = d.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(d.path().string());
  }
  *ok = !ec;
  return out;
}

void DiskTier::link_image(const ChunkId& chunk, const ChunkId& image) {
  const std::string link = fmt::format("{}/link/{}.{}", dir_, chunk.hex(), image.hex());
  if (tombstoned(chunk)) return remove_files({image_path(image)});  // made after a delete
  if (is_tombstoned_file(link)) return;                             // linked already
  if (!write_atomic(link, "")) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.errors;
  }
}

TierErase DiskTier::erase_canonical(const ChunkId& id) {
  if (!write_atomic(tombstone_path(id), "")) {  // durable before anything goes
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.errors;
    log().warn("store: cannot write the tombstone of {}: {}", id.hex(), std::strerror(errno));
    return TierErase::Unreachable;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    tombs_.insert(id);
  }
  std::error_code ec;
  const bool had = std::filesystem::remove(canonical_path(id), ec);  // a directory may stay
  bool listed = false, linked = false;
  std::vector<std::string> gone = files_of("patch", id, &listed);
  for (const std::string& link : files_of("link", id, &linked)) {
    gone.push_back(fmt::format("{}/image/{}.kie", dir_, link.substr(link.rfind('.') + 1)));
    gone.push_back(link);
  }
  remove_files(gone);
  {
    std::lock_guard<std::mutex> lock(mu_);
    index_drop(canonical_path(id));
  }
  bool left = !listed || !linked;  // a patch or an image that would outlive the delete
  for (const std::string& p : gone)
    left = left ||
           std::filesystem::symlink_status(p, ec).type() != std::filesystem::file_type::not_found;
  if (left) {
    log().warn("store: the files of chunk {} could not all be removed", id.hex());
    return TierErase::Unreachable;
  }
  return had ? TierErase::Erased : TierErase::Absent;
}

void DiskTier::revive_canonical(const ChunkId& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tombs_.erase(id);
  }
  std::error_code ec;
  std::filesystem::remove(tombstone_path(id), ec);
}

bool DiskTier::holds_canonical(const ChunkId& id) const {
  const std::string path = canonical_path(id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!files_.count(path)) return false;
  }
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);  // not removed since
}

std::string DiskTier::last_write_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

StoreTier::Stats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kamera
