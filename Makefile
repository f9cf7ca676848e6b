# kamera: the two set-up commands are `make demo` and `make test` (see README.md).
# `make demo` installs the runtime set of Debian packages (scripts/install-deps.sh runtime) and the
# openai npm client, builds bin/kamera alone and runs the demo; `make test` installs every set and
# builds and runs everything.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 8
CMAKE_GEN  := -G Ninja
# The clang builds link with lld: GNU ld took 30 s for the ASan unit_tests binary and 24 s for
# bin/kamera, lld about a tenth of that.
LLD_LINK   := -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
              -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld

.PHONY: all deps deps-runtime build demo demo-build test test-main test-asan fuzz-build fuzz-smoke bench eval train-minivl train-minivl-v2 format clean

all: build

deps:
	@bash scripts/install-deps.sh runtime test trainer

deps-runtime:
	@bash scripts/install-deps.sh runtime

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release -DKAMERA_TESTS=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The demo's install-and-build phase (scripts/time-demo-build.sh times it on a fresh clone): the
# runtime packages, the openai npm client (where npm is), and the one binary the demo runs. The
# tests are configured only where GoogleTest is installed (then nothing of them is built here).
demo-build: deps-runtime
	@bash scripts/install-openai-client.sh $(BUILD)/npm
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target kamera

demo: demo-build
	@bash scripts/demo.sh $(BUILD)

# Every test label in the release build, then the unit label under ASan+UBSan (clang, -O0 with
# line tables only: reports keep file:line, the build skips full debug info; clang compiles this
# tree in about 60% of GCC's time), then a short run of each libFuzzer target over its seed corpus.
test: build test-main test-asan fuzz-smoke

test-main: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DKAMERA_SANITIZE=ON -DCMAKE_C_FLAGS_DEBUG=-gline-tables-only \
	  -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only $(LLD_LINK) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) --target unit_tests
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -L unit -j $(JOBS)

# -O1 with line tables: libFuzzer's usual flags, and the cheapest build that still symbolizes a
# crash's stack. Only the fuzz targets and the layers they link are built.
fuzz-build: deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DKAMERA_FUZZ=ON $(LLD_LINK) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all

fuzz-smoke: fuzz-build
	@bash scripts/fuzz-smoke.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: build
	@bash scripts/bench.sh $(BUILD)

# The evaluation suite on every model (results/*.json) and its report (docs/report/).
# SUITE=smoke for the short run.
eval: build
	@bash scripts/eval-all.sh $(BUILD)

# Retrains the committed mini-VL (models/minivl/) from scratch: the exact command, seed and
# schedule of docs/MINIVL.md (about 35 minutes on 2 cores; needs libtorch-dev).
train-minivl: build
	@mkdir -p $(BUILD)/minivl-train
	$(BUILD)/bin/kamera-train train --seed 1 --steps 4000 --frames 6 --questions 3 \
	  --batch-clips 16 --lr 3e-3 --eval-every 250 --eval-clips 200 -t 2 \
	  -o $(BUILD)/minivl-train --log $(BUILD)/minivl-train/curve.json
	@echo "compare with models/minivl/ (cmp), or copy the two .gguf files there to replace them"

# Trains mini-VL v2 (models/minivl-v2/): 16 tokens per frame (4-pixel patches, 2 x 2 merge), a
# 6-layer decoder and the two-frame question family; docs/MINIVL.md, "mini-VL v2" (about 45
# minutes on 2 cores).
train-minivl-v2: build
	@mkdir -p $(BUILD)/minivl-v2-train
	$(BUILD)/bin/kamera-train train --seed 1 --steps 3000 --frames 6 --questions 3 --two-frame \
	  --patch 4 --layers 6 --batch-clips 16 --lr 3e-3 --eval-every 250 --eval-clips 200 -t 2 \
	  -o $(BUILD)/minivl-v2-train --log $(BUILD)/minivl-v2-train/curve.json
	@echo "compare with models/minivl-v2/ (cmp), or copy the two .gguf files there to replace them"

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
