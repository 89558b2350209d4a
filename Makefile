# Two commands do everything on a fresh Debian machine:
#   make run    installs what is missing, builds in Release, runs the main job
#   make test   installs what is missing, builds, runs every test
BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build run test test-unit test-asan bench format tidy clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: the server with the page and the API (HOST and PORT override the defaults).
HOST ?= 127.0.0.1
PORT ?= 8080
run: build
	@echo "gpuplan: open http://$(HOST):$(PORT)/ in a browser (API under /api/v1; Ctrl-C stops it)"
	./$(BUILD_DIR)/gpuplan serve --host $(HOST) --port $(PORT)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# AddressSanitizer + UndefinedBehaviorSanitizer build of the library and the unit tests.
test-asan: deps
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUPLAN_SANITIZE=ON -DGPUPLAN_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS) -L unit

bench: build
	./$(BUILD_DIR)/bench/gpuplan_bench --benchmark_min_time=0.2

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

tidy: build
	clang-tidy -p $(BUILD_DIR) $$(git ls-files 'src/*.cc')

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
