// Every subcommand's --json output is machine-readable: stdout parses as one JSON document even
#include "support/temp_path.h"
// when the command warns (messages go to stderr). Runs the built `kamera` binary on tiny files.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct Output {
  std::string out, err;
  int rc = -1;
};

// `wrap`: a command the binary runs under (`timeout 20 `: a server that would start is stopped).
Output run(const std::string& args, const std::string& wrap = "") {
  const std::string err_path = unique_temp("kamera-cli-json.stderr");
  const std::string cmd =
      wrap + std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args + " 2>" + err_path;
  Output o;
  FILE* f = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; f && (n = fread(buf.data(), 1, buf.size(), f)) > 0;) o.out.append(buf.data(), n);
  o.rc = f ? pclose(f) : -1;
  std::ifstream e(err_path);
  o.err.assign(std::istreambuf_iterator<char>(e), {});
  return o;
}

void expect_json(const std::string& args, bool expect_warning = false) {
  SCOPED_TRACE(args);
  const Output o = run(args);
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(nlohmann::json::accept(o.out)) << "stdout is not one JSON document:\n" << o.out;
  if (expect_warning) {
    EXPECT_FALSE(o.err.empty()) << "expected a warning on stderr";
  }
}

// Replaces a same-length string value in a file (a metadata value of a GGUF).
void patch_bytes(const std::string& path, const std::string& from, const std::string& to) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  const size_t key = bytes.find("tokenizer.ggml.model");
  ASSERT_NE(key, std::string::npos);
  const size_t at = bytes.find(from, key + 20);
  ASSERT_NE(at, std::string::npos);
  f.seekp(std::streamoff(at));
  f.write(to.data(), std::streamsize(to.size()));
}

TEST(CliJson, EverySubcommandPrintsPureJson) {
  const std::string dir = unique_temp("");
  const std::string model = dir + "kamera-cli-json.gguf", odd = dir + "kamera-cli-json-odd.gguf";
  const std::string items = dir + "kamera-cli-json-items.jsonl";
  // make-model: llama.cpp incompatibility notes go to stderr.
  expect_json("make-model --arch llama --preset tiny --dims rope_dims=8 --json -o " + odd, true);
  expect_json("make-model --arch qwen2 --preset tiny --seed 3 --json -o " + model);
  // A vocabulary kind kamera does not read: the loader warns and runs on token ids.
  run("make-model --arch qwen2 --preset tiny --seed 3 -o " + odd);
  patch_bytes(odd, "llama", "xbert");
  expect_json("logits -m " + odd + " --tokens 1,5,9 --json", true);
  expect_json("logits -m " + model + " --tokens 1,5,9 --all-positions --json");
  expect_json("generate -m " + model + " -n 4 --temp 0 --json");
  expect_json("bench prefill -m " + model + " --tokens 32 --reps 1 --json");
  expect_json("bench grammar -m " + model + " --tokens 24 --json --schema " +
              std::string(KAMERA_SOURCE_DIR) + "/tests/data/grammar/person.schema.json");
  {
    std::ofstream f(items);
    for (int i = 0; i < 3; ++i)
      f << "{\"antecedent\": [" << 10 + i << ", 11, 12, 13], \"chunk\": [20, 21, " << 30 + i
        << ", 23, 24], \"query\": [40, 41]}\n";
  }
  expect_json("reuse-bench -m " + model + " --items " + items + " --ranks 1,full --json");
  expect_json("window-bench -m " + model + " --items " + items +
              " --scenario slide --limit 2 --json");
  const std::string src = KAMERA_SOURCE_DIR;
  expect_json("demo --frames 8 --window 4 --reps 1 --png none --json --decoder " + src +
              "/models/minivl/minivl.gguf --vision " + src + "/models/minivl/minivl-mmproj.gguf");
}

// --no-floor: the engine's runs alone, no OpenBLAS floor between them (a profile of the engine).
TEST(CliJson, BenchNoFloorTimesTheEngineAlone) {
  const std::string model = unique_temp("kamera-cli-nofloor.gguf");
  ASSERT_EQ(run("make-model --arch qwen2 --preset tiny --seed 3 -o " + model).rc, 0);
  for (const bool floor : {true, false}) {
    const Output o = run("bench prefill -m " + model + " --tokens 16 --reps 2 --json" +
                         (floor ? "" : " --no-floor"));
    ASSERT_EQ(o.rc, 0) << o.err;
    const auto j = nlohmann::json::parse(o.out);
    EXPECT_EQ(j["engine_ms_all"].size(), 2u);
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0.0);
    EXPECT_EQ(j["blas_floor_ms_all"].size(), floor ? 2u : 0u);
    EXPECT_EQ(j["blas_floor_ms_median"].is_null(), !floor);
  }
}

}  // namespace

// `kamera quant-bench` (docs/BENCHMARKS.md's kernel tables) on small shapes: one JSON row per
// type, shape and row count; --repacked times the layout the model loader gives the types that
// have one (q8_0, q4_K: repacked) and leaves the others in their rows (f16).
TEST(CliJson, QuantBenchTimesTheFileRowsOrTheRepackedLayout) {
  for (const bool repacked : {false, true}) {
    const Output o = run(std::string("quant-bench --types q8_0,q4_K,f16 --shapes 32x256 -n 1,32 ") +
                         "-t 1 --reps 1 --json" + (repacked ? " --repacked" : ""));
    ASSERT_EQ(o.rc, 0) << o.err;
    const auto j = nlohmann::json::parse(o.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << o.out;
    ASSERT_EQ(j["results"].size(), 6u) << o.out;
    for (const auto& r : j["results"]) {
      SCOPED_TRACE(r.dump());
      EXPECT_GT(r["gflops"].get<double>(), 0.0);
      EXPECT_EQ(r["repacked"].get<bool>(), repacked && r["type"] != "f16");
    }
  }
}

// `kamera quant-bench --gguf` times every matrix of a file; with --repacked the ones whose type has
// a repacked layout (here q8_0, rows a multiple of 16) in that layout, as the model loader
// holds them.
TEST(CliJson, QuantBenchGgufRepacksWhatTheLoaderRepacks) {
  const std::string model = unique_temp("kamera-cli-qb.gguf");
  ASSERT_EQ(run("make-model --arch qwen2 --preset tiny --type q8_0 -o " + model).rc, 0);
  for (const bool repacked : {false, true}) {
    const Output o = run("quant-bench --gguf " + model + " -n 1 -t 1 --reps 1 --cpu-time --json" +
                         (repacked ? " --repacked" : ""));
    ASSERT_EQ(o.rc, 0) << o.err;
    const auto j = nlohmann::json::parse(o.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << o.out;
    EXPECT_EQ(j["weights"], repacked ? "repacked" : "file mapping");
    if (repacked) {
      EXPECT_GT(j["repacked_matrices"].get<int>(), 0);
    } else {
      EXPECT_EQ(j["repacked_matrices"].get<int>(), 0);
    }
    ASSERT_EQ(j["results"].size(), 1u) << o.out;
    EXPECT_GT(j["results"][0]["gflops"].get<double>(), 0.0);
  }
  std::remove(model.c_str());
}

// `kamera serve`'s sizes in MiB refuse what is no size (NaN, infinities, negatives, too large)
// by the option's name before anything starts. (The segment budget is KV pool pages now, no
// longer carved out of --store-mb: ServerSegments.TheSegmentsLiveInTheKvPoolNotInTheStore.)
TEST(CliSizes, ServeRefusesWhatIsNoSizeByName) {
  const std::string model = unique_temp("kamera-cli-sizes.gguf");
  ASSERT_EQ(run("make-model --arch llama --preset tiny -o " + model).rc, 0);
  for (const std::string bad :
       {"--store-mb nan", "--store-mb inf", "--store-mb -5", "--store-mb 1e12",
        "--segment-cache-mb nan", "--segment-cache-mb -2", "--store-dir-mb -inf"}) {
    SCOPED_TRACE(bad);
    const Output o = run("serve -m " + model + " --port 0 " + bad, "timeout 20 ");
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.err.find(bad.substr(0, bad.find(' ')) + ": a size in MiB"), std::string::npos)
        << o.err;
  }
  std::remove(model.c_str());
}
