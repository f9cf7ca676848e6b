// Status names, the thread's last error, and the boundary helpers of src/api/handles.h.
#include <cstring>

#include "api/handles.h"

namespace kamera::api {

namespace {

thread_local std::string last_error;

static_assert(KAMERA_ERR_INVALID_ARGUMENT == int(ErrorCode::InvalidArgument) &&
                  KAMERA_ERR_NOT_FOUND == int(ErrorCode::NotFound) &&
                  KAMERA_ERR_OUT_OF_MEMORY == int(ErrorCode::OutOfMemory) &&
                  KAMERA_ERR_CORRUPT_DATA == int(ErrorCode::CorruptData) &&
                  KAMERA_ERR_UNSUPPORTED == int(ErrorCode::Unsupported) &&
                  KAMERA_ERR_INTERNAL == int(ErrorCode::Internal) &&
                  KAMERA_ERR_IO == int(ErrorCode::Io),
              "kamera_status must keep ErrorCode's values");

}  // namespace

kamera_status set_error(kamera_status status, std::string message) {
  try {
    last_error = std::move(message);
  } catch (...) {
    last_error.clear();  // no room for the message: the status still tells the kind
  }
  return status;
}

kamera_status fail_noexcept(kamera_status status, const char* fn, const char* what) noexcept {
  try {
    last_error.assign(fn).append(": ").append(what);
  } catch (...) {
    last_error.clear();
  }
  return status;
}

kamera_status set_error(const Error& e) {
  return set_error(to_status(e.code), e.message);
}

kamera_status null_argument(const char* fn, const char* name) {
  return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: argument '{}' is null", fn, name);
}

kamera_status check_chunk_model(const char* fn, const kamera_chunk* chunk, const Model& model) {
  if (chunk->fingerprint != model.fingerprint)
    return fail(KAMERA_ERR_INVALID_ARGUMENT,
                "{}: chunk {} was made for another model than the context's ({})", fn,
                chunk->id.hex(), model.source);
  return KAMERA_OK;
}

void write_hex(const ChunkId& id, char out[KAMERA_ID_HEX_SIZE]) {
  const std::string h = id.hex();
  std::memcpy(out, h.c_str(), KAMERA_ID_HEX_SIZE);
}

}  // namespace kamera::api

extern "C" {

const char* kamera_status_name(kamera_status status) {
  if (status == KAMERA_OK) return "ok";
  if (status < KAMERA_ERR_INVALID_ARGUMENT || status > KAMERA_ERR_IO) return "unknown";
  return kamera::error_code_name(static_cast<kamera::ErrorCode>(status));
}

const char* kamera_last_error(void) {
  return kamera::api::last_error.c_str();
}

const char* kamera_version(void) {
  return KAMERA_VERSION_STRING;
}

}  // extern "C"
