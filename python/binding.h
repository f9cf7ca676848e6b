// Shared pieces of the Python binding (module kamera._kamera), which wraps the public C API
// (include/kamera.h) with pybind11: owning handle types, the error translation, and read-only
// numpy views.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "kamera.h"

namespace kamera_py {

namespace py = pybind11;

// A C API failure: the status code and kamera_last_error()'s message. The module translates it
// into kamera.Error with .code (int) and .name ("not_found", ...).
struct ApiError {
  kamera_status code;
  std::string message;
};

// Throws ApiError unless the call succeeded.
inline void check(kamera_status st) {
  if (st != KAMERA_OK) throw ApiError{st, kamera_last_error()};
}

// Owning handles (the C API's *_free accepts null).
template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using ModelPtr = std::shared_ptr<kamera_model>;
using ContextPtr = std::shared_ptr<kamera_context>;
using ChunkPtr = std::shared_ptr<kamera_chunk>;

// Python-side objects. Each keeps what it was made from alive on the Python side as well (the
// C API already does so internally; this keeps e.g. Context.model returning the same object).
struct Model {
  ModelPtr h;
  kamera_model_info info{};
};

struct Context {
  ContextPtr h;
  std::shared_ptr<Model> model;
};

struct Chunk {
  ChunkPtr h;
  std::shared_ptr<Model> model;
};

// Read-only numpy array over `data` whose lifetime is tied to `base`.
template <class T>
py::array readonly_array(const T* data, std::vector<py::ssize_t> shape, py::handle base) {
  py::array a(py::dtype::of<T>(), std::move(shape), {}, data, base);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

// Logits as a read-only numpy array without a copy: the array owns the kamera_logits handle.
// rows x n_vocab, or (n_vocab,) when `squeeze` and there is one row.
py::object logits_array(kamera_logits* l, bool squeeze);

// "none" | "last" | "all".
kamera_logits_mode parse_logits_mode(const std::string& s);

// A chunk from a Python argument: a Chunk, or a sequence of token ids (made for `model`).
std::shared_ptr<Chunk> as_chunk(const std::shared_ptr<Model>& model, py::handle obj);

void bind_model(py::module_& m);
void bind_context(py::module_& m);
void bind_window(py::module_& m);
void bind_minivl(py::module_& m);

}  // namespace kamera_py
