// The one load path of the store's slower tiers (disk, Redis). A tier fetches a blob with its own
// transport (a file; a Redis GET) and hands over a way to delete it; the rest is shared: a blob
// over the entry size limit, or one that does not open with the tier's codec (corrupt, foreign,
// forged, misshapen for the model, filed under another id), is discarded (deleted, logged and
// counted), and the entry is a miss, never served. So is something that is not an entry at all
// (the fetch says why: a directory or FIFO named like one, a symbolic link).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/log.h"
#include "store/entry_codec.h"

namespace kamera {

// What a tier's fetch found under an entry's name.
struct Fetched {
  enum class State {
    Missing,  // no entry (or the backend could not be asked: then `error`)
    Found,    // `blob` holds the bytes
    Refused,  // present but not an entry (`why`): discarded unread
  } state = State::Missing;
  std::string blob;
  std::string why;
  bool error = false;  // an I/O failure, not the entry's fault: a miss, nothing discarded
};

// Per kind of entry: the key it is looked up under and how the codec opens it.
template <class Entry>
struct Sealed;
template <>
struct Sealed<CanonicalEntry> {
  using Key = ChunkId;
  static auto open(const TierCodec& c, std::string_view b, const Key& k, bool* forged) {
    return c.open_canonical(b, k, forged);
  }
};
template <>
struct Sealed<PatchEntry> {
  using Key = PatchKey;
  static auto open(const TierCodec& c, std::string_view b, const Key& k, bool* forged) {
    return c.open_patch(b, k, forged);
  }
};
template <>
struct Sealed<ImageEntry> {
  using Key = ChunkId;
  static auto open(const TierCodec& c, std::string_view b, const Key& k, bool* forged) {
    return c.open_image(b, k, forged);
  }
};

// One load's outcome, counted into the tier's stats by count() (under the tier's own lock).
template <class Entry>
struct Loaded {
  std::shared_ptr<const Entry> entry;
  bool discarded = false, forged = false, error = false;
  void count(StoreTier::Stats& s) const {
    ++(entry ? s.hits : s.misses);
    s.discarded += discarded;
    s.forged += forged && discarded;
    s.errors += error;
  }
};

// fetch() -> Fetched; discard() deletes what was fetched. `tier` and `name` label the log line.
template <class Entry, class Fetch, class Discard>
Loaded<Entry> load_sealed(const TierCodec& codec, const typename Sealed<Entry>::Key& key,
                          std::string_view tier, std::string_view name, Fetch&& fetch,
                          Discard&& discard) {
  Loaded<Entry> out;
  Fetched f = fetch();
  out.error = f.error;
  if (f.error) log().warn("store: {} tier: cannot read {}: {}", tier, name, f.why);
  if (f.state == Fetched::State::Missing) return out;
  std::string why = std::move(f.why);
  if (f.state == Fetched::State::Found && f.blob.size() > codec.max_entry_bytes()) {
    why = fmt::format("{} bytes, over the entry size limit of {}", f.blob.size(),
                      codec.max_entry_bytes());
  } else if (f.state == Fetched::State::Found) {
    auto e = Sealed<Entry>::open(codec, f.blob, key, &out.forged);
    if (e.ok()) {
      out.entry = std::move(*e);
      return out;
    }
    why = e.message();
  }
  log().warn("store: {} tier: discarding {}: {}", tier, name, why);
  discard();
  out.discarded = true;
  return out;
}

}  // namespace kamera
