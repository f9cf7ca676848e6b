// Scratch paths for tests. ctest runs every test in its own process, two at a time: a fixed name
// under TempDir() would be shared by tests running side by side (one truncating a model file
// another has mapped, one emptying a folder another reads), so each process gets its own names.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

// Removes what unique_temp's names of process `pid` left in the temporary folder: every entry
// whose name starts with "kamera-p<pid>-" (files, and folders with what they hold), names a test
// built on top of a unique_temp prefix included.
inline void remove_temps_of(long pid) {
  const std::string prefix = "kamera-p" + std::to_string(pid) + "-";
  std::error_code ec;
  std::vector<std::filesystem::path> mine;
  for (std::filesystem::directory_iterator it(testing::TempDir(), ec), end; !ec && it != end;
       it.increment(ec))  // never throws: it runs at exit
    if (it->path().filename().string().rfind(prefix, 0) == 0) mine.push_back(it->path());
  for (const auto& p : mine) std::filesystem::remove_all(p, ec);
}

// At the test process's exit, its scratch files go: a run of the suite left thousands of model
// files and stores behind in the temporary folder.
struct TempSweep {
  ~TempSweep() { remove_temps_of(long(getpid())); }
};

inline std::string unique_temp(const std::string& name) {
  static TempSweep sweep;  // destroyed at exit
  return testing::TempDir() + "kamera-p" + std::to_string(getpid()) + "-" + name;
}
