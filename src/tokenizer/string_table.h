// A vocabulary's strings packed into one buffer: id -> bytes, and (once indexed) bytes -> id by an
// open-addressing table of ids. A 150k-token vocabulary costs about 5 MB here, against about 16 MB
// as a std::vector<std::string> beside a std::unordered_map<std::string, int32_t> of copies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kamera {

class StringTable {
 public:
  // Appends `s` as id size().
  void add(std::string_view s);
  // Makes find() work over every string added so far; the first id of a repeated string wins.
  void build_index();

  size_t size() const { return ends_.size(); }
  std::string_view at(int32_t id) const {
    const uint32_t b = id == 0 ? 0 : ends_[size_t(id) - 1];
    return std::string_view(chars_).substr(b, ends_[size_t(id)] - b);
  }
  // The id of `s`, or -1 (also -1 before build_index()).
  int32_t find(std::string_view s) const;

 private:
  std::string chars_;           // every string, back to back
  std::vector<uint32_t> ends_;  // ends_[id]: one past the last byte of id in chars_
  std::vector<int32_t> slots_;  // ids by hash, linear probing; -1 = empty; size a power of two
};

}  // namespace kamera
