// Scratch paths for tests. ctest runs every test in its own process, two at a time: a fixed name
// under TempDir() would be shared by tests running side by side (one truncating a model file
// another has mapped, one emptying a folder another reads), so each process gets its own names.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

inline std::string unique_temp(const std::string& name) {
  return testing::TempDir() + "kamera-p" + std::to_string(getpid()) + "-" + name;
}
