# gpucloud — top-level entry points. `make test` and `make demo` install what is missing first.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
CMAKE_ARGS ?=
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
# Debian 12's clang-format 14: the version the format check (scripts/check-format) uses.
CLANG_FORMAT ?= $(shell command -v clang-format-14 || echo clang-format)

.PHONY: all deps configure build test demo asan fuzz bench format lint clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

demo: build
	@BUILD_DIR=$(BUILD_DIR) scripts/demo

# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer.
asan:
	@$(MAKE) --no-print-directory test BUILD_DIR=build-asan BUILD_TYPE=Debug \
	  CMAKE_ARGS="-DGPUCLOUD_SANITIZE=ON"

# libFuzzer on the manifest parser, the REST request path, the agent's watch events and the policy
# parser (clang).
# FUZZ_SECONDS=600 make fuzz for a long run (each target that long).
fuzz:
	@scripts/install-deps --with-fuzz
	@cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DGPUCLOUD_FUZZ=ON >/dev/null
	@cmake --build build-fuzz --target manifest_fuzzer rest_fuzzer assignment_event_fuzzer \
	  policy_fuzzer
	@mkdir -p fuzz-corpus/manifest fuzz-corpus/rest fuzz-corpus/assignment-events \
	  fuzz-corpus/policy
	@build-fuzz/src/manifest/manifest_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -dict=src/manifest/fuzz/manifest.dict fuzz-corpus/manifest examples testdata/manifests
	@build-fuzz/src/server/rest_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -dict=src/server/fuzz/rest.dict fuzz-corpus/rest src/server/fuzz/seeds
	@build-fuzz/src/agent/assignment_event_fuzzer -max_total_time=$(FUZZ_SECONDS) \
	  -print_final_stats=1 fuzz-corpus/assignment-events src/agent/fuzz/seeds
	@build-fuzz/src/manifest/policy_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -dict=src/manifest/fuzz/policy.dict fuzz-corpus/policy examples/policies \
	  src/manifest/fuzz/policy_seeds

bench: build
	@$(BUILD_DIR)/bench/manifest_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

format:
	@$(CLANG_FORMAT) -i $$(git ls-files '*.h' '*.cc')

# clang-tidy and clang-format --dry-run on the C++ files changed since LINT_BASE (default: the
# merge-base with origin/main, else HEAD~1); scripts/lint. Non-zero exit on any finding.
lint: configure
	@BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) LINT_BASE=$(LINT_BASE) CLANG_FORMAT=$(CLANG_FORMAT) \
	  scripts/lint

clean:
	@rm -rf build build-asan build-fuzz
