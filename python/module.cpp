// The module kamera._kamera: the public C API (include/kamera.h) for Python. kamera/__init__.py
// re-exports it; docs/API.md documents it.
#include "binding.h"

namespace kamera_py {
namespace {

PyObject* error_type = nullptr;     // kamera.Error (kept for the process's life)
PyObject* argument_type = nullptr;  // kamera.ArgumentError: a kamera.Error and a TypeError

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const ApiError& e) {
    py::object err = py::handle(error_type)(e.message);
    err.attr("code") = int(e.code);
    err.attr("name") = kamera_status_name(e.code);
    PyErr_SetObject(error_type, err.ptr());
  } catch (const py::cast_error& e) {  // a value of the wrong type inside a call
    py::object err = py::handle(argument_type)(std::string("wrong argument type: ") + e.what());
    err.attr("code") = int(KAMERA_ERR_INVALID_ARGUMENT);
    err.attr("name") = kamera_status_name(KAMERA_ERR_INVALID_ARGUMENT);
    PyErr_SetObject(argument_type, err.ptr());
  }
}

}  // namespace
}  // namespace kamera_py

PYBIND11_MODULE(_kamera, m) {
  using namespace kamera_py;
  m.doc() = "kamera: a CPU inference engine with a position-free KV cache";
  error_type = PyErr_NewExceptionWithDoc(
      "kamera.Error", "A kamera failure: .code (int, the C API's status) and .name.",
      PyExc_RuntimeError, nullptr);
  if (!error_type) throw py::error_already_set();
  m.attr("Error") = py::handle(error_type);
  py::tuple bases = py::make_tuple(py::handle(error_type), py::handle(PyExc_TypeError));
  argument_type = PyErr_NewExceptionWithDoc(
      "kamera.ArgumentError",
      "An argument of the wrong type: a kamera.Error (name 'invalid_argument') and a TypeError.",
      bases.ptr(), nullptr);
  if (!argument_type) throw py::error_already_set();
  m.attr("ArgumentError") = py::handle(argument_type);
  py::register_exception_translator(&translate);
  m.attr("FULL_RANK") = KAMERA_FULL_RANK;
  m.attr("__version__") = kamera_version();
  // Types named in the signatures of classes bound before them are declared first (help() and
  // errors then show "Context", not the C++ type's name).
  py::class_<Context, std::shared_ptr<Context>>(
      m, "Context", "A model's engine, KV pool and chunk store. Not thread-safe.");
  bind_model(m);
  bind_context(m);
  bind_window(m);
  bind_minivl(m);
}
