// libFuzzer target for the GGUF reader: parse arbitrary bytes; when they parse, read every tensor
// and call every accessor on every key. Any crash, sanitizer report or leak is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kamera::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!f.ok()) {
    // Messages always name the file.
    if (f.message().rfind("fuzz.gguf: ", 0) != 0) __builtin_trap();
    return 0;
  }
  const kamera::GgufFile& g = **f;
  volatile double sink = g.version();
  for (const auto& [key, value] : g.metadata()) {
    if (g.find(key) != &value || !g.has(key)) __builtin_trap();
    if (auto v = g.get_int(key)) sink = sink + double(*v);
    if (auto v = g.get_float(key)) sink = sink + *v;
    if (auto v = g.get_bool(key)) sink = sink + *v;
    if (auto v = g.get_string(key)) sink = sink + double(v->size());
    if (const auto* v = g.get_string_array(key)) {
      for (const std::string& s : *v) sink = sink + double(s.size());
    }
    if (const auto* v = g.get_float_array(key)) {
      for (double x : *v) sink = sink + x;
    }
    if (const auto* v = g.get_int_array(key)) {
      for (int64_t x : *v) sink = sink + double(x);
    }
  }
  for (const kamera::GgufTensor& t : g.tensors()) {
    if (g.find_tensor(t.name) != &t) __builtin_trap();
    auto v = g.read_f32(t);
    if (!v.ok()) continue;  // out of memory only
    if (int64_t(v->size()) != t.n_elements()) __builtin_trap();
    for (float x : *v) sink = sink + x;
  }
  (void)sink;
  return 0;
}
