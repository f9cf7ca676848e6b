// `kamera bench decode`'s read floor, and scripts/bench-vs-llamacpp.sh in its bounded --tiny
// mode. CI has no llama.cpp build: the script's kamera side runs on tiny files, and the llama.cpp
// side only when KAMERA_LLAMA_CPP_BUILD names a build directory (skipped, and said, otherwise).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "support/shell.h"
#include "support/temp_path.h"

namespace {

const std::string kKamera = std::string(KAMERA_BINARY_DIR) + "/bin/kamera";

// The cells of the Markdown row that starts with "| <type> | <test> |".
std::vector<std::string> row(const std::string& table, const std::string& type,
                             const std::string& test) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| " + type + " | " + test + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream c(line.substr(1));
    for (std::string cell; std::getline(c, cell, '|');)
      cells.push_back(cell.substr(1, cell.size() - 2));
    return cells;
  }
  return {};
}

// The floor is the fastest of the reads, tok/s is its inverse, and the engine's share is the
// engine's tok/s over it; the bytes are those of every matrix a token multiplies (the tiny qwen2
// ties its output head to the embedding, so that is every matrix of the file).
TEST(BenchDecode, ReadFloorIsTheFastestReadOfTheWeights) {
  const std::string model = unique_temp("read-floor.gguf");
  ASSERT_EQ(
      run_shell(kKamera + " make-model --arch qwen2 --preset tiny --type q8_0 -o " + model).rc, 0);
  const ShellOutput o =
      run_shell(kKamera + " bench decode -m " + model + " --tokens 4 --ctx 2 --reps 2 --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  const auto& f = j.at("read_floor");
  const std::vector<double> all = f.at("read_ms_all");
  ASSERT_EQ(all.size(), 6u);  // three reads per rep
  double fastest = all[0];
  for (double ms : all) fastest = std::min(fastest, ms);
  EXPECT_DOUBLE_EQ(f.at("read_ms_min").get<double>(), fastest);
  EXPECT_NEAR(f.at("floor_tokens_per_s").get<double>(), 1e3 / fastest, 1e-9 * 1e3 / fastest);
  EXPECT_DOUBLE_EQ(f.at("weight_bytes_per_token").get<double>(),
                   j.at("system").at("model").at("weight_bytes").get<double>());
  EXPECT_NEAR(f.at("read_gb_per_s").get<double>(),
              f.at("weight_bytes_per_token").get<double>() / (fastest * 1e6), 1e-6);
  EXPECT_NEAR(f.at("share_of_floor").get<double>(),
              j.at("tokens_per_s").get<double>() / f.at("floor_tokens_per_s").get<double>(), 1e-9);
  std::remove(model.c_str());
}

// docs/BENCHMARKS.md's "Decode at depth": `bench decode --ctx N --kv-type bf16` times decode after
// N cached tokens in a bf16 pool (past 1024 keys: the split-K decode kernel, ops/attention_split.h)
// and says so in its JSON.
TEST(BenchDecode, AtDepthInABf16PoolAsTheDepthBlockRunsIt) {
  const std::string model = unique_temp("depth.gguf");
  ASSERT_EQ(
      run_shell(kKamera + " make-model --arch qwen2 --preset tiny --type q8_0 --dims ctx=2048 -o " +
                model)
          .rc,
      0);
  const ShellOutput o = run_shell(kKamera + " bench decode -m " + model +
                                  " --tokens 4 --ctx 1100 --reps 1 -t 2 --kv-type bf16 --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j.at("context_before"), 1100);
  EXPECT_EQ(j.at("kv_type"), "bf16");
  EXPECT_EQ(j.at("tokens"), 4);
  EXPECT_GT(j.at("tokens_per_s").get<double>(), 0.0);
  std::remove(model.c_str());
}

// docs/BENCHMARKS.md's AVX-VNNI comparison: `KAMERA_ISA=avx2` and `KAMERA_ISA=avx2_vnni` on
// `bench decode` and `bench prefill`, each run's JSON naming the path it took (plain AVX2, or
// the repacked layouts through vpdpbusd).
TEST(BenchDecode, KameraIsaAvx2OrAvx2VnniNamesThePathItRan) {
  if (kamera::cpu_isa_level() < kamera::IsaLevel::Avx2 || !kamera::cpu_features().avx_vnni)
    GTEST_SKIP() << "CPU without AVX-VNNI (" << kamera::cpu_feature_string() << ")";
  const std::string model = unique_temp("isa-vnni.gguf");
  ASSERT_EQ(
      run_shell(kKamera + " make-model --arch qwen2 --preset tiny --type q8_0 -o " + model).rc, 0);
  for (const std::string cap : {"avx2", "avx2_vnni"})
    for (const std::string mode : {"decode --tokens 4 --ctx 2", "prefill --tokens 32"}) {
      SCOPED_TRACE(cap + " " + mode);
      const ShellOutput o = run_shell("KAMERA_ISA=" + cap + " " + kKamera + " bench " + mode +
                                      " --reps 1 -m " + model + " --json");
      ASSERT_EQ(o.rc, 0) << o.err;
      const auto j = nlohmann::json::parse(o.out);
      const std::string path = j.at("system").at("weight_paths").at("q8_0");
      EXPECT_NE(path.find("decode " + cap + " q8_0-dot"), std::string::npos) << path;
      EXPECT_EQ(path.find("repacked x16 avx-vnni") != std::string::npos, cap == "avx2_vnni")
          << path;
      EXPECT_GT(j.at("tokens_per_s").get<double>(), 0.0);
    }
  std::remove(model.c_str());
}

TEST(BenchVsLlamaCpp, TinyModePrintsTheRatioTable) {
  const char* llama = std::getenv("KAMERA_LLAMA_CPP_BUILD");
  const bool with_llama = llama != nullptr && *llama != '\0';
  if (!with_llama)
    std::printf("KAMERA_LLAMA_CPP_BUILD not set: the llama.cpp side is skipped, kamera's runs\n");
  const std::string dir = unique_temp("bench-vs-llamacpp");
  const ShellOutput o =
      run_shell("bash " + std::string(KAMERA_SOURCE_DIR) +
                "/scripts/bench-vs-llamacpp.sh --tiny --pp 24 --tg 8 --kamera " + kKamera +
                " --dir " + dir + (with_llama ? " " + std::string(llama) : ""));
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("host: "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("kamera ISA level: "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("kamera's f32 BLAS: "), std::string::npos) << o.out;
  if (!with_llama) {
    EXPECT_NE(o.err.find("no llama.cpp build given"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("skipped Q4_K_M"), std::string::npos) << o.err;
  }
  const size_t ratio_cols = with_llama ? 2 : 0;
  for (const std::string type : {"Q8_0", "F16"}) {
    SCOPED_TRACE(type);
    // --pp and --tg after --tiny set the two tests' lengths (the rows are named by them).
    const auto pp = row(o.out, type, "pp24"), tg = row(o.out, type, "tg8");
    ASSERT_EQ(pp.size(), 7 + ratio_cols) << o.out;
    ASSERT_EQ(tg.size(), 7 + ratio_cols) << o.out;
    EXPECT_GT(std::stod(pp[2]), 0.0);
    EXPECT_EQ(pp[3 + ratio_cols], "–");
    // tg: kamera tok/s, then the floor's tok/s (GB/s) and kamera's share of it.
    const double k = std::stod(tg[2]), floor = std::stod(tg[3 + ratio_cols]);
    EXPECT_GT(k, 0.0);
    EXPECT_GT(floor, 0.0);
    EXPECT_NEAR(std::stod(tg[4 + ratio_cols]), k / floor, 0.006 + 0.05 * k / floor);
    // Peak RSS of the decode run (MB), then the file's size in MB, as measured here: a process
    // that maps the whole file holds at least its bytes once it has read them all.
    const std::string rss = tg[5 + ratio_cols];
    const std::string file = dir + "/qwen2-tiny-" + type + ".gguf";
    const double file_mb = double(std::filesystem::file_size(file)) / (1 << 20);
    EXPECT_NE(rss.find(fmt::format("({:.0f})", file_mb)), std::string::npos) << rss;
    EXPECT_GE(std::stod(rss), file_mb) << rss;
    // The floor at the run's fastest read is the strictest: kamera's share of it is at most its
    // share of this row's own (median) floor. (The tiny files are read from cache, some rows far
    // faster than others, so the strict share may print as 0.00 here.)
    const double strict = std::stod(tg[6 + ratio_cols]);
    EXPECT_GE(strict, 0.0);
    EXPECT_LE(strict, std::stod(tg[4 + ratio_cols]) + 0.005);
  }
  // --from-log prints the same table again from the run's log, running nothing.
  const ShellOutput again =
      run_shell("bash " + std::string(KAMERA_SOURCE_DIR) +
                "/scripts/bench-vs-llamacpp.sh --from-log " + dir + "/runs.jsonl");
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(again.out, o.out);
  std::filesystem::remove_all(dir);
}

// --kamera-base runs a second kamera binary (main's, for a branch's block) right after the first
// in every round: the table names it and adds its tok/s and kamera / base after kamera's.
TEST(BenchVsLlamaCpp, KameraBaseRunsBesideKameraInEveryRound) {
  const std::string dir = unique_temp("bench-vs-llamacpp-base");
  const ShellOutput o = run_shell("bash " + std::string(KAMERA_SOURCE_DIR) +
                                  "/scripts/bench-vs-llamacpp.sh --tiny --types Q8_0 --pp 8 --tg 4"
                                  " --kamera " +
                                  kKamera + " --kamera-base " + kKamera + " --dir " + dir);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("kamera-base: " + kKamera), std::string::npos) << o.out;
  // The header has a cell for every cell of the rows (no empty column without a llama.cpp build).
  const size_t at = o.out.find("| file | test |");
  ASSERT_NE(at, std::string::npos) << o.out;
  const std::string head = o.out.substr(at, o.out.find('\n', at) - at);
  EXPECT_EQ(std::count(head.begin(), head.end(), '|'), 10) << head;
  EXPECT_EQ(head.find("|  |"), std::string::npos) << head;
  for (const std::string test : {"pp8", "tg4"}) {
    const auto cells = row(o.out, "Q8_0", test);
    ASSERT_EQ(cells.size(), 9u) << o.out;
    const double k = std::stod(cells[2]), b = std::stod(cells[3]);
    EXPECT_GT(b, 0.0);
    EXPECT_NEAR(std::stod(cells[4]), k / b, 0.006 + 0.005 * k / b) << o.out;
  }
  std::filesystem::remove_all(dir);
}

// --arch, --preset and --dims choose make-model's files (the per-family blocks of
// docs/BENCHMARKS.md), the dims go into the file names, and every run records the host's load.
TEST(BenchVsLlamaCpp, ArchAndDimsChooseTheFilesAndEveryRunRecordsTheLoad) {
  const std::string dir = unique_temp("bench-vs-llamacpp-arch");
  const ShellOutput o =
      run_shell("bash " + std::string(KAMERA_SOURCE_DIR) +
                "/scripts/bench-vs-llamacpp.sh --tiny --arch smollm3 --dims layers=1 --types Q8_0"
                " --pp 8 --tg 4 --kamera " +
                kKamera + " --dir " + dir);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/smollm3-tiny-layers1-Q8_0.gguf")) << o.err;
  EXPECT_EQ(row(o.out, "Q8_0", "pp8").size(), 7u) << o.out;
  EXPECT_NE(o.out.find("1-minute load average before each run: "), std::string::npos) << o.out;
  std::ifstream log(dir + "/runs.jsonl");
  int runs = 0;
  for (std::string line; std::getline(log, line); ++runs) {
    const auto r = nlohmann::json::parse(line);
    EXPECT_EQ(r.at("out").at("model").at("arch"), "smollm3");
    EXPECT_EQ(r.at("out").at("model").at("n_layers"), 1);
    EXPECT_GE(r.at("load1").get<double>(), 0.0);
  }
  EXPECT_EQ(runs, 2);  // pp and tg, one round
  std::filesystem::remove_all(dir);
}

// docs/BENCHMARKS.md's AVX2 block: --isa caps kamera's runs with KAMERA_ISA (each run's JSON
// names the AVX2 path it took, the table says the cap), and --ik adds an ik_llama.cpp build at
// -rtr 0 and -rtr 1 with kamera / the better of the two (when KAMERA_IK_LLAMA_BUILD names one;
// CI has none: the ik side is skipped, and said).
TEST(BenchVsLlamaCpp, IsaCapAndIkColumnsAsTheAvx2BlockRunsThem) {
  if (kamera::cpu_isa_level() < kamera::IsaLevel::Avx2) GTEST_SKIP() << "CPU without AVX2";
  const char* ik = std::getenv("KAMERA_IK_LLAMA_BUILD");
  const bool with_ik = ik != nullptr && *ik != '\0';
  if (!with_ik) std::printf("KAMERA_IK_LLAMA_BUILD not set: the ik_llama.cpp side is skipped\n");
  const std::string dir = unique_temp("bench-vs-llamacpp-isa");
  const ShellOutput o = run_shell(
      "bash " + std::string(KAMERA_SOURCE_DIR) +
      "/scripts/bench-vs-llamacpp.sh --tiny --isa avx2 --types Q8_0 --pp 8 --tg 4 --kamera " +
      kKamera + " --dir " + dir + (with_ik ? " --ik " + std::string(ik) : ""));
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("kamera capped: KAMERA_ISA=avx2"), std::string::npos) << o.out;
  std::ifstream log(dir + "/runs.jsonl");
  int kamera_runs = 0, ik_runs = 0;
  for (std::string line; std::getline(log, line);) {
    const auto r = nlohmann::json::parse(line);
    const std::string engine = r.at("engine");
    if (engine.rfind("ik-rtr", 0) == 0) ++ik_runs;
    if (engine != "kamera") continue;
    ++kamera_runs;
    EXPECT_EQ(r.at("isa"), "avx2");
    const std::string path = r.at("out").at("system").at("weight_paths").at("q8_0");
    EXPECT_NE(path.find("avx2"), std::string::npos) << path;
    EXPECT_EQ(path.find("avx512"), std::string::npos) << path;
  }
  EXPECT_EQ(kamera_runs, 2);            // pp and tg, one round
  EXPECT_EQ(ik_runs, with_ik ? 4 : 0);  // both tests at -rtr 0 and 1
  for (const std::string test : {"pp8", "tg4"}) {
    const auto cells = row(o.out, "Q8_0", test);
    ASSERT_EQ(cells.size(), with_ik ? 10u : 7u) << o.out;
    if (!with_ik) continue;
    // kamera / the better of ik's two settings
    const double k = std::stod(cells[2]), i0 = std::stod(cells[3]), i1 = std::stod(cells[4]);
    EXPECT_GT(std::min(i0, i1), 0.0);
    EXPECT_NEAR(std::stod(cells[5]), k / std::max(i0, i1), 0.006 + 0.005 * k / std::max(i0, i1));
  }
  std::filesystem::remove_all(dir);
}

// A file the run needs but cannot make stops it before any measurement, saying why: a llama.cpp
// build without llama-quantize (an AVX2 build of the bench target alone), or a quantize that fails.
TEST(BenchVsLlamaCpp, AMissingQuantizeOrAFailedOneStopsTheRunSayingWhy) {
  const std::string dir = unique_temp("bench-vs-llamacpp-quant");
  const std::string build = dir + "/llama-build";
  std::filesystem::create_directories(build);
  const auto tool = [&](const std::string& name, const std::string& body) {
    std::ofstream(build + "/" + name) << "#!/bin/sh\n" << body << "\n";
    std::filesystem::permissions(build + "/" + name, std::filesystem::perms::owner_all);
  };
  tool("llama-bench", "echo never run >&2; exit 1");
  const std::string cmd = "bash " + std::string(KAMERA_SOURCE_DIR) +
                          "/scripts/bench-vs-llamacpp.sh --tiny --types Q4_K_M --pp 8 --tg 4"
                          " --kamera " +
                          kKamera + " --dir " + dir + " " + build;
  const ShellOutput none = run_shell(cmd);
  EXPECT_EQ(WEXITSTATUS(none.rc), 2) << none.err;
  EXPECT_NE(none.err.find("no given build has llama-quantize"), std::string::npos) << none.err;
  tool("llama-quantize", "exit 1");
  const ShellOutput failed = run_shell(cmd);
  EXPECT_EQ(WEXITSTATUS(failed.rc), 2) << failed.err;
  EXPECT_NE(failed.err.find("llama-quantize failed to write Q4_K_M"), std::string::npos)
      << failed.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/qwen2-tiny-Q4_K_M.gguf"));
  EXPECT_EQ(std::filesystem::file_size(dir + "/runs.jsonl"), 0u) << "nothing was measured";
  std::filesystem::remove_all(dir);
}

}  // namespace
