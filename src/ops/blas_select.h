// Which OpenBLAS kernels the f32 products run on, chosen from the CPU's ISA level.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels when it is loaded, from the CPU model
// number. Where it does not know the model it falls back to Prescott (SSE3) kernels: 4-5x slower
// than its SkylakeX kernels on an AVX-512 Xeon that 0.3.21 does not list. Its own switch,
// OPENBLAS_CORETYPE, is read once in the library's constructor, before kamera's code runs and
// before a host process (a Python binding) could be asked to set it.
//
// kamera therefore re-selects the kernel table after OpenBLAS has loaded, through the library's
// exported dynamic-arch entry points: the kernels that match isa_level() (capped at AVX-512,
// the highest f32 level OpenBLAS has), SkylakeX for AVX-512, Haswell for AVX2, never from model
// numbers. This runs once, when kamera is loaded (a static initializer in ops/gemm.cpp) and
// again lazily on the first product, costs ~30 us, and changes nothing where OpenBLAS already
// chose kernels of the right level (AMD EPYC: Zen).
//
// Overrides: OPENBLAS_CORETYPE set by the user is respected (kamera does not switch);
// KAMERA_BLAS_CORE=keep leaves OpenBLAS as loaded; KAMERA_BLAS_CORE=<core> (Haswell, SkylakeX,
// Prescott, ...) selects that core; KAMERA_ISA caps the level (core/cpu_features.h).
//
// The switch rewrites OpenBLAS's process-wide kernel table: a host process that runs OpenBLAS
// products on another thread at the instant kamera is loaded could see one call mix two tables.
// Such a host sets KAMERA_BLAS_CORE=keep (and OPENBLAS_CORETYPE itself).
#pragma once

#include <string>
#include <string_view>

#include "core/cpu_features.h"
#include "core/status.h"

namespace kamera {

struct BlasInfo {
  std::string config;                        // openblas_get_config(): version, build options, core
  std::string loaded_core;                   // the kernels OpenBLAS chose itself when it was loaded
  std::string core;                          // the kernels in use now
  IsaLevel core_level = IsaLevel::Scalar;    // ISA level of `core`'s f32 kernels
  IsaLevel wanted_level = IsaLevel::Scalar;  // the best f32 level for this CPU (see above)
  bool selectable = false;  // a DYNAMIC_ARCH build whose kernel tables kamera can select
  std::string decision;     // what kamera did and why ("switched Prescott -> SkylakeX ...")
};

// Selects the kernels once (idempotent, thread-safe) and returns the state after it.
const BlasInfo& ensure_blas_kernels();
// The current state (core may have changed through set_blas_core).
BlasInfo blas_info();

// The ISA level of an OpenBLAS core's f32 kernels ("SkylakeX" -> Avx512, "Zen" -> Avx2,
// "Prescott" -> Scalar; case-insensitive; unknown names -> Scalar).
IsaLevel openblas_core_level(std::string_view core);

// Switches OpenBLAS to the named core's kernels (benchmarks and tests: A/B of kernel tables in one
// process). Not safe while another thread runs an OpenBLAS call. InvalidArgument when the core
// needs more than the CPU has, NotFound when this OpenBLAS has no such table, Unsupported when it
// is not a DYNAMIC_ARCH build.
Status set_blas_core(std::string_view core);

}  // namespace kamera
