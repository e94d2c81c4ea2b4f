# Thin wrapper over CMake: the README's two commands are `make demo` and
MAKEFLAGS += --no-print-directory
# `make test`; plain `make` builds everything into build/.
JOBS  ?= $(shell nproc)
CMAKE ?= cmake

.PHONY: all deps build check test test-plain test-asan test-fuzz demo install clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@$(CMAKE) --build build -j$(JOBS)

# The quick check for whoever changes the code (about a minute): the unit
# tests, the layering, one API suite in process and through uscmd.
check: build
	cd build && ctest --output-on-failure -j$(JOBS) -L check

# The whole suite: plain build, then ASan+UBSan build, then a libFuzzer smoke.
test: test-plain test-asan test-fuzz

test-plain: build
	cd build && ctest --output-on-failure -j$(JOBS)

test-asan: deps
	@$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DUSCM_SANITIZE=ON >/dev/null
	@$(CMAKE) --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS)

test-fuzz: deps
	@$(CMAKE) -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DUSCM_FUZZ=ON >/dev/null
	@$(CMAKE) --build build-fuzz -j$(JOBS)
	cd build-fuzz && ctest --output-on-failure -j$(JOBS)

# The main job: a live rdma_cm connection (unmodified rping over uscm's
# librdmacm) on the simulated fabric, captured and decoded.
demo: build
	@scripts/demo.sh

# librdmacm.so.1, headers, uscmd and its systemd units, the replay/testbed
# tools (uscm-decode, uscm-replay, uscm-sim + its drop-ins in a private
# lib/uscm/sim, uscm-bench, uscm-hostile) and their man pages: docs/install.md.
# PREFIX=/usr/local by default.
PREFIX ?= /usr/local
install: build
	$(CMAKE) --install build --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-fuzz
