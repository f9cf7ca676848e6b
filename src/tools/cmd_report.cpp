// kamera report: Markdown plus SVG figures from `kamera eval` result files.
#include <cstdio>

#include "tools/cli_common.h"
#include "tools/report.h"

namespace kamera::cli {

namespace {

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string out = "docs/report", gnuplot = "gnuplot", title = "kamera evaluation report";
  bool json = false;
};

int run_report_cmd(const ReportArgs& a) {
  std::vector<ReportInput> inputs;
  for (const auto& p : a.inputs) {
    auto in = read_eval_result(p);
    if (!in.ok()) return fail(in.message(), a.json);
    inputs.push_back(std::move(in.value()));
  }
  ReportOptions o;
  o.out_dir = a.out;
  o.gnuplot = a.gnuplot;
  o.title = a.title;
  auto r = write_report(inputs, o);
  if (!r.ok()) return fail(r.message(), a.json);
  if (a.json) {
    print_json(json{{"markdown", r->markdown}, {"figures", r->figures}}, 2);
    return 0;
  }
  std::printf("wrote %s and %zu figures under %s/figures\n", r->markdown.c_str(), r->figures.size(),
              a.out.c_str());
  return 0;
}

}  // namespace

Runner add_report(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  app.footer(
      "Figures: eta vs rank, KL per arm, eta vs extra KV bytes (matched budgets), deficit norm\n"
      "and energy by layer and rank, token diffuseness, single-layer injection, serve vs\n"
      "re-prefill time by chunk length. Each SVG's gnuplot script is written next to it.\n"
      "Example: kamera report --in results/*.json --out docs/report");
  app.add_option("--in", a->inputs, "Result files written by kamera eval -o")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--out", a->out, "Output folder (README.md and figures/)")->capture_default_str();
  app.add_option("--gnuplot", a->gnuplot, "gnuplot executable")->capture_default_str();
  app.add_option("--title", a->title, "Report title")->capture_default_str();
  app.add_flag("--json", a->json, "Print the written paths as JSON");
  return [a] { return run_report_cmd(*a); };
}

}  // namespace kamera::cli
