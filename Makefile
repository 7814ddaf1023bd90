# kvtier: the two set-up commands (`make demo`, `make test`) and their friends.
# Every target installs missing Debian packages first (.ci/install-deps), then
# configures the CMake build once and builds incrementally.

BUILD    ?= build
JOBS     ?= $(shell nproc)
CTEST    := ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
BUILD_TYPE ?= RelWithDebInfo

.PHONY: all deps configure build test test-busy demo replay-full replay-nodes bench \
	bench-reference bench-start policy-bounds bench-start-ext4 soak crash-loops \
	asan fuzz fuzz-build fuzz-merge clean format format-check

all: build

deps:
	@.ci/install-deps

CONFIGURE = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

$(BUILD)/CMakeCache.txt: | deps
	$(CONFIGURE)

configure: $(BUILD)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

## The whole default test suite (Boost.Test through CTest), soak runs excluded.
test: build
	$(CTEST) -LE soak

## The default suite three times in a row while two busy processes keep
## both cores loaded (a new user's first `make test` runs beside other
## work): every run must pass. CI runs it on demand.
test-busy: build
	@.ci/busy-test 3 $(CTEST) -LE soak

## The main job on the embedded default configuration: the first half hour
## of the conversation trace replayed with every state verified, RAM 256 MiB
## and SSD 1 GiB, both below its working set, so RAM evicts and the SSD
## serves a share (docs/replay.md); writes demo-data/replay.json and
## demo-data/replay.svg. Builds only what it runs (the library and the
## kvtier program: no tests, benchmarks or example); the configure and
## build output goes to $(DEMO_LOG), a progress line shows on a terminal,
## and the log's tail is printed when the build fails.
DEMO_LOG = $(BUILD)/demo-build.log
demo: deps
	@mkdir -p $(BUILD); start=$$(date +%s); \
	echo "kvtier: building the library and the kvtier program ($(JOBS) jobs; output in $(DEMO_LOG))"; \
	{ { [ -f $(BUILD)/CMakeCache.txt ] || $(CONFIGURE); } && \
	  cmake --build $(BUILD) -j $(JOBS) --target kvtier_program; \
	  echo $$? > $(DEMO_LOG).rc; } 2>&1 | tee $(DEMO_LOG) | \
	  awk -v tty=$$([ -t 1 ] && echo 1) '/^\[ *[0-9]+%\]/ && tty { \
	    printf "\r%-79.79s", $$0; fflush() } END { if (tty) printf "\r%79s\r", "" }'; \
	rc=$$(cat $(DEMO_LOG).rc); rm -f $(DEMO_LOG).rc; \
	if [ "$$rc" != 0 ]; then tail -n 40 $(DEMO_LOG); \
	  echo "kvtier: the build failed; all of its output is in $(DEMO_LOG)"; exit 1; fi; \
	echo "kvtier: built in $$(( $$(date +%s) - start )) s"
	@$(BUILD)/bin/kvtier demo

## Long replays kept out of `make demo`: the synthetic Mooncake trace and the
## 71 merged WEKA agent sessions, each with its JSON report and chart.
## Every request of each (the [replay] default replays the first 6000).
replay-full: build
	$(BUILD)/bin/kvtier replay --replay.max-requests=0 \
	  tests/traces/mooncake-fast25/synthetic_trace.jsonl.gz \
	  --json demo-data/synthetic.json --plot demo-data/synthetic.svg
	$(BUILD)/bin/kvtier replay --replay.max-requests=0 \
	  tests/traces/kv-cache-tester-weka \
	  --json demo-data/weka.json --plot demo-data/weka.svg

## The multi-node comparison (docs/replay.md "Several nodes"): the
## conversation trace through 3 node processes under the routed, single,
## random and round-robin placements, every state verified.
## RAM 768 MiB in all (256 MiB a node), below the trace's working set, so
## SSD serves a share; SSD 1 GiB in all.
replay-nodes: build
	$(BUILD)/bin/kvtier replay --nodes 3 --replay.max-requests=0 \
	  --replay.ram-cap-bytes=805306368 \
	  --json demo-data/replay-nodes.json --plot demo-data/replay-nodes.svg

## Every benchmark program, each printing its table.
bench: build
	@set -e; for b in $(BUILD)/bin/bench_*; do \
	  [ -x "$$b" ] || continue; echo "== $$b"; "$$b"; done
	@echo "== tests/bench/bench_reference.py"; $(MAKE) --no-print-directory bench-reference

## The SSD tier's start over a million generated entry files: time to the
## first answered lookup and to fully indexed, beside the blocking start
## (docs/ssd-format.md "Start-up"). `make bench` runs it at 100000 files.
## On a file system mounted with `discard` deleting the files afterwards
## takes most of an hour; BENCH_START_DIR=/dev/shm measures without the disk,
## `make bench-start-ext4` (root) on the disk, in a loop-mounted ext4 image
## it makes under BENCH_START_IMAGE_DIR (/var/tmp) and removes afterwards.
BENCH_START_DIR ?= /tmp
bench-start: build
	$(BUILD)/bin/bench_start_scan --files 1000000 --dir $(BENCH_START_DIR)

bench-start-ext4: build
	tests/bench/bench_start_ext4.sh $(BUILD)/bin/bench_start_scan 1000000

## The reference engine's time to first token with kvtier reuse (RAM, SSD,
## peer) beside its prefill, per prefix length 512 .. 8192 (docs/python.md).
bench-reference: build
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 tests/bench/bench_reference.py

## What eviction policies that know only the past reach against LRU and
## against oracles that know the future, per capacity, and how well the
## past forecasts the next use (docs/eviction.md, "The synthetic trace's
## gain"). Python's standard library only; builds nothing.
policy-bounds:
	/usr/bin/python3 tests/bench/policy_bounds.py --trace synthetic
	/usr/bin/python3 tests/bench/policy_bounds.py --trace conversation

## Long runs kept out of the default suite (crash loops, fuzzing, soaks).
soak: build
	$(CTEST) -L soak

## The SSD tier's long crash loops alone, their figures printed: torn
## writes over the in-memory file system and the expected-state loop
## (kill points and SIGKILL; docs/ssd-format.md, "Crash tests").
crash-loops: build
	$(CTEST) -V -R '^ssd\.(torn|expected_state|crash)_soak$$'

## The suite under AddressSanitizer and UBSan, in its own build folder.
asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKVTIER_SANITIZE=ON
	cmake --build build-asan -j $(JOBS)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE soak

## Coverage-guided fuzzing (docs/testing.md "Fuzzing"): the fuzz targets
## of tests/fuzz/ built with clang, libFuzzer, ASan and UBSan in their own
## build folder (only the layers they need), the seeds regenerated into
## tests/fuzz/corpus/, then each target run FUZZ_SECONDS over its corpus;
## prints executions, coverage and crashes per target, fails on a crash.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 2
FUZZ_TARGETS ?= entry_format messages bulk_lane config trace http
FUZZ_CCACHE  := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

fuzz-build: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DKVTIER_FUZZ=ON -DKVTIER_BUILD_TESTS=OFF $(FUZZ_CCACHE)
	nice -n 5 cmake --build $(FUZZ_BUILD) -j $(FUZZ_JOBS) --target fuzz_all
	$(FUZZ_BUILD)/bin/fuzz_seeds tests/fuzz/corpus

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

## Adds to tests/fuzz/corpus/ the inputs the last `make fuzz` found that
## add coverage (libFuzzer -merge=1), keeping the corpus small.
fuzz-merge:
	@for t in $(FUZZ_TARGETS); do \
	  $(FUZZ_BUILD)/bin/fuzz_$$t -merge=1 -timeout=10 tests/fuzz/corpus/$$t \
	    $(FUZZ_BUILD)/fuzz-corpus/$$t 2>&1 | grep -E '^MERGE-OUTER: [0-9]+ new files'; \
	done

## Sources to format: the C++ files git knows plus new ones, generated excluded.
SOURCES = $(shell git ls-files --cached --others --exclude-standard -- '*.cpp' '*.hpp')

format: deps
	clang-format -i $(SOURCES)

## Fails when a source differs from .clang-format's layout (CI runs this).
format-check: deps
	clang-format --dry-run --Werror $(SOURCES)

clean:
	rm -rf $(BUILD) build-asan $(FUZZ_BUILD)
