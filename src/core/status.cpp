#include "core/status.h"

namespace kamera {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return "invalid_argument";
    case ErrorCode::NotFound:
      return "not_found";
    case ErrorCode::OutOfMemory:
      return "out_of_memory";
    case ErrorCode::CorruptData:
      return "corrupt_data";
    case ErrorCode::Unsupported:
      return "unsupported";
    case ErrorCode::Internal:
      return "internal";
    case ErrorCode::Io:
      return "io";
  }
  return "unknown";
}

}  // namespace kamera
