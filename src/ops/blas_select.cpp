#include "ops/blas_select.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>

namespace kamera {

namespace {

// The dynamic-arch entry points a DYNAMIC_ARCH OpenBLAS exports (driver/others/dynamic.c):
// quit clears the kernel-table pointer, init picks a table (OPENBLAS_CORETYPE first, else the
// CPU model) and runs its parameter setup. Looked up at run time: other BLAS builds lack them.
struct DynamicArch {
  void* handle = nullptr;
  void (*init)() = nullptr;
  void (*quit)() = nullptr;
};

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = char(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

bool same_name(std::string_view a, std::string_view b) {
  return upper(a) == upper(b);
}

// The loaded OpenBLAS: the object that holds openblas_get_config (works when kamera is itself a
// library loaded RTLD_LOCAL), else the usual soname.
std::optional<DynamicArch> find_dynamic_arch() {
  void* h = nullptr;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&openblas_get_config), &info) != 0 && info.dli_fname)
    h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr || dlsym(h, "gotoblas_dynamic_init") == nullptr)
    h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return std::nullopt;
  DynamicArch d;
  d.handle = h;
  d.init = reinterpret_cast<void (*)()>(dlsym(h, "gotoblas_dynamic_init"));
  d.quit = reinterpret_cast<void (*)()>(dlsym(h, "gotoblas_dynamic_quit"));
  if (d.init == nullptr || d.quit == nullptr) return std::nullopt;
  return d;
}

const std::optional<DynamicArch>& dynamic_arch() {
  static const std::optional<DynamicArch> d = find_dynamic_arch();
  return d;
}

std::mutex& switch_mutex() {
  static std::mutex m;
  return m;
}

std::string current_core() {
  const char* c = openblas_get_corename();
  return c ? c : "unknown";
}

// The f32 kernels OpenBLAS has for a level (it has none above AVX-512 for f32 products).
const char* core_for(IsaLevel l) {
  if (l >= IsaLevel::Avx512) return "SkylakeX";
  if (l >= IsaLevel::Avx2) return "Haswell";
  return "Prescott";
}

IsaLevel wanted_level() {
  const IsaLevel l = isa_level();
  return l > IsaLevel::Avx512 ? IsaLevel::Avx512 : l;
}

// Re-runs OpenBLAS's dynamic init with OPENBLAS_CORETYPE = core for the call; OPENBLAS_CORETYPE
// is how that init is told the table. The user's value (if any) is put back.
void reinit(const DynamicArch& d, std::string_view core) {
  const char* prev = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> saved = prev ? std::optional<std::string>(prev) : std::nullopt;
  setenv("OPENBLAS_CORETYPE", std::string(core).c_str(), 1);
  d.quit();
  d.init();
  if (saved) {
    setenv("OPENBLAS_CORETYPE", saved->c_str(), 1);
  } else {
    unsetenv("OPENBLAS_CORETYPE");
  }
}

Status switch_locked(std::string_view core) {
  const auto& d = dynamic_arch();
  if (!d)
    return make_error(ErrorCode::Unsupported,
                      "OpenBLAS ({}) is not a DYNAMIC_ARCH build: its kernels cannot be selected",
                      openblas_get_config());
  if (openblas_core_level(core) > cpu_isa_level())
    return make_error(ErrorCode::InvalidArgument, "OpenBLAS core '{}' needs {} but this CPU has {}",
                      core, isa_level_name(openblas_core_level(core)),
                      isa_level_name(cpu_isa_level()));
  const std::string table = "gotoblas_" + upper(core);
  if (dlsym(d->handle, table.c_str()) == nullptr)
    return make_error(ErrorCode::NotFound, "OpenBLAS ({}) has no '{}' kernels (no symbol {})",
                      openblas_get_config(), core, table);
  const std::string before = current_core();
  reinit(*d, core);
  if (!same_name(current_core(), core)) {
    const std::string got = current_core();
    reinit(*d, before);
    return make_error(ErrorCode::Internal,
                      "OpenBLAS did not take the '{}' kernels (it ran '{}'); back on '{}'", core,
                      got, current_core());
  }
  return Status::Ok();
}

BlasInfo select_once() {
  BlasInfo info;
  info.loaded_core = current_core();
  info.wanted_level = wanted_level();
  info.selectable = dynamic_arch().has_value();
  const std::string forced = std::getenv("KAMERA_BLAS_CORE") ? std::getenv("KAMERA_BLAS_CORE") : "";
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  std::string target;
  if (forced == "keep") {
    info.decision = "kept: KAMERA_BLAS_CORE=keep";
  } else if (!forced.empty() && forced != "auto") {
    target = forced;
    info.decision = "KAMERA_BLAS_CORE=" + forced;
  } else if (user && *user) {
    info.decision = fmt::format("kept: OPENBLAS_CORETYPE={} set by the user", user);
  } else if (openblas_core_level(info.loaded_core) == info.wanted_level) {
    info.decision = "kept: OpenBLAS's own choice matches the CPU";
  } else {
    target = core_for(info.wanted_level);
    info.decision = fmt::format("switched to {} for {}", target, isa_level_name(info.wanted_level));
  }
  if (!target.empty() && !same_name(target, info.loaded_core)) {
    std::lock_guard<std::mutex> lock(switch_mutex());
    if (Status s = switch_locked(target); !s.ok()) info.decision = "not switched: " + s.message();
  }
  return info;
}

}  // namespace

IsaLevel openblas_core_level(std::string_view core) {
  const std::string c = upper(core);
  if (c == "SKYLAKEX" || c == "COOPERLAKE" || c == "SAPPHIRERAPIDS") return IsaLevel::Avx512;
  if (c == "HASWELL" || c == "ZEN") return IsaLevel::Avx2;
  return IsaLevel::Scalar;
}

const BlasInfo& ensure_blas_kernels() {
  static const BlasInfo info = select_once();
  return info;
}

BlasInfo blas_info() {
  BlasInfo info = ensure_blas_kernels();
  info.config = openblas_get_config();
  info.core = current_core();
  info.core_level = openblas_core_level(info.core);
  return info;
}

Status set_blas_core(std::string_view core) {
  ensure_blas_kernels();
  std::lock_guard<std::mutex> lock(switch_mutex());
  return switch_locked(core);
}

}  // namespace kamera
