// Runs a shell command line for a test and collects its stdout, stderr and exit status.
#pragma once

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "support/temp_path.h"

struct ShellOutput {
  std::string out, err;
  int rc = -1;  // pclose's status (0: exited with 0)
};

inline ShellOutput run_shell(const std::string& cmd) {
  const std::string err_path = unique_temp("run-shell.stderr");
  ShellOutput o;
  FILE* f = popen((cmd + " 2>" + err_path).c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; f && (n = fread(buf.data(), 1, buf.size(), f)) > 0;) o.out.append(buf.data(), n);
  o.rc = f ? pclose(f) : -1;
  std::ifstream e(err_path);
  o.err.assign(std::istreambuf_iterator<char>(e), {});
  std::remove(err_path.c_str());
  return o;
}
