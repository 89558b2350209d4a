# Two commands do everything on a fresh Debian machine:
#   make run    installs what is missing, builds in Release, runs the main job
#   make test   installs what is missing, builds, runs every test
BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
FUZZ_DIR  ?= build-fuzz
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build run test check-includes test-unit test-asan fuzz fuzz-build fuzz-replay bench bench-build bench-check bench-record install format tidy tidy-changed clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: the server with the page, the API and a market holding a small DEMO inventory in
# $(DEMO_DIR)/ (scripts/market-demo.sh prints a renter's and a provider's token; HOST and PORT override
# the defaults; delete $(DEMO_DIR)/ to start over).
HOST ?= 127.0.0.1
PORT ?= 8080
DEMO_DIR ?= .gpuplan-demo
# It builds only the gpuplan binary (the page and data are embedded in it); tests and benchmarks are
# built by `make test` and `make bench`.
run: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS) --target gpuplan
	@echo "gpuplan: open http://$(HOST):$(PORT)/ in a browser (API under /api/v1; Ctrl-C stops it)"
	./scripts/market-demo.sh ./$(BUILD_DIR)/gpuplan $(HOST) $(PORT) $(DEMO_DIR)

# The gpuplan binary (its data is embedded) into $(PREFIX)/bin.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# The include direction between src/ folders (scripts/layers.txt; docs/design.md "Dependency rules").
check-includes:
	./scripts/check-includes.sh

# Every test runs inside a throwaway PostgreSQL 15 (scripts/with-postgres.sh: a Unix socket in a
# temporary folder, removed afterwards), so the market's store tests run on SQLite and on PostgreSQL,
# and inside a throwaway Slurm (scripts/with-slurm.sh: slurmctld, slurmd and munged on localhost), so
# the Slurm hand-off runs against a real one.
test: build
	./scripts/with-postgres.sh ./scripts/with-slurm.sh ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# AddressSanitizer + UndefinedBehaviorSanitizer build of everything, running every test label (unit,
# golden, web): the golden and browser tests drive the sanitized `gpuplan` binary, so a report there
# (it goes to stderr and the exit status) fails them too. The browser tests get a longer limit
# (GPUPLAN_WEB_TIMEOUT_SECONDS): the sanitized Debug server answers several times slower.
ASAN_WEB_TIMEOUT_SECONDS ?= 900
test-asan: deps
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUPLAN_SANITIZE=ON -DGPUPLAN_BENCH=OFF -DGPUPLAN_CUDA=OFF \
	  -DGPUPLAN_WEB_TIMEOUT_SECONDS=$(ASAN_WEB_TIMEOUT_SECONDS) $(CMAKE_FLAGS)
	cmake --build $(ASAN_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ./scripts/with-postgres.sh ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS)

# libFuzzer targets (fuzz/, CONTRIBUTING.md "Fuzzing"): a clang build with ASan+UBSan in $(FUZZ_DIR),
# the replay of the seed corpora and saved regressions (ctest label fuzz), then FUZZ_SECONDS of
# fuzzing per target. A crash fails the target; its input lands in $(FUZZ_DIR)/artifacts/<target>/.
FUZZ_SECONDS ?= 60
FUZZ_CXX ?= clang++
fuzz-build: deps
	CXX=$(FUZZ_CXX) cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUPLAN_FUZZ=ON \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
	  -DGPUPLAN_TESTS=OFF -DGPUPLAN_BENCH=OFF
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzzers

fuzz-replay: fuzz-build
	ctest --test-dir $(FUZZ_DIR) --output-on-failure -j $(JOBS) -L fuzz

fuzz: fuzz-replay
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) ./fuzz/run.sh $(FUZZ_DIR)

bench: build
	./$(BUILD_DIR)/bench/gpuplan_bench --benchmark_min_time=0.2

# Benchmark regressions (scripts/bench-check.py): the tracked benchmarks of bench/tracked.json, run once
# (about a minute on 2 cores) as ratios to BM_Reference, against bench/recorded.json; a ratio beyond
# its noise band fails, naming the benchmark. bench-record re-measures (record_runs runs: the bands)
# and regenerates the speed tables in docs/*.md; commit both files.
# Both build the bench quietly (its log is printed only when the build fails) and bench-record prints
# one line per benchmark; VERBOSE=1 shows the build and a line per run.
BENCH_BIN = ./$(BUILD_DIR)/bench/gpuplan_bench
bench-build: deps $(BUILD_DIR)/build.ninja
ifeq ($(VERBOSE),1)
	cmake --build $(BUILD_DIR) -j $(JOBS) --target gpuplan_bench
else
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target gpuplan_bench >$(BUILD_DIR)/bench-build.log 2>&1 || \
	  { cat $(BUILD_DIR)/bench-build.log; exit 1; }
endif

bench-check: bench-build
	@python3 scripts/bench-check.py check --bench $(BENCH_BIN)

bench-record: bench-build
	@python3 scripts/bench-check.py record --bench $(BENCH_BIN) $(if $(filter 1,$(VERBOSE)),--verbose)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

tidy: build
	TIDY_ALL=1 BUILD_DIR=$(BUILD_DIR) ./scripts/tidy.sh

# clang-tidy on the src/ files this branch changes against BASE (default: the merge base with origin/main).
tidy-changed: $(BUILD_DIR)/build.ninja
	BUILD_DIR=$(BUILD_DIR) ./scripts/tidy.sh

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)
