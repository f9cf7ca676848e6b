// Looks up one arm of a `kamera eval --suite mini-vl` result (run_minivl_eval's JSON).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace kamera::testing_support {

inline const nlohmann::json& minivl_arm(const nlohmann::json& doc, const std::string& name,
                                        const std::string& knob) {
  for (const auto& a : doc["arms"])
    if (a["arm"] == name && a["knob"] == knob) return a;
  static const nlohmann::json none;
  ADD_FAILURE() << "no arm " << name << " " << knob;
  return none;
}

}  // namespace kamera::testing_support
