// `kamera report`: Markdown tables plus SVG figures (drawn by gnuplot) from the JSON documents
// `kamera eval` writes. Every figure's gnuplot script is kept next to it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace kamera {

struct ReportInput {
  std::string path;  // where it was read from (quoted in the report)
  nlohmann::json doc;
};

struct ReportOptions {
  std::string out_dir;
  std::string gnuplot = "gnuplot";
  std::string title = "kamera evaluation report";
};

struct ReportOutput {
  std::string markdown;              // path of the report
  std::vector<std::string> figures;  // paths of the SVGs
};

// Reads and checks an eval result (kind "kamera-eval"); errors name the file.
Result<ReportInput> read_eval_result(const std::string& path);

Result<ReportOutput> write_report(const std::vector<ReportInput>& inputs,
                                  const ReportOptions& opts);

}  // namespace kamera
