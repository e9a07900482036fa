# Thin driver over CMake. `make test` and `make demo` install what is missing first.
BUILD     ?= build
ASAN_BUILD ?= build-asan
PREFIX    ?= /usr/local
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps configure test demo install sanitize lint format bench clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

test: deps
	@$(MAKE) --no-print-directory all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/tplua recipes/llama_identical.lua

# bin/tplua, lib/libtplua.so and .a, include/tplua.h, lib/pkgconfig/tplua.pc, the Lua module
# (lib/lua/5.4/tp.so), share/tplua (stdlib, recipes, tools); DESTDIR=... stages it.
install: all
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix $(PREFIX)

# A self-contained tplua (binary, its libraries but glibc, the stdlib) to carry to a GPU
# machine and run tools/gpu-check there (docs/gpu.md, "The GPU check").
GPU_BUNDLE ?= $(BUILD)/gpu-bundle
.PHONY: gpu-bundle
gpu-bundle: all
	scripts/gpu-bundle $(BUILD) $(GPU_BUNDLE)

sanitize: deps
	@test -f $(ASAN_BUILD)/CMakeCache.txt || \
	  CC=clang cmake -S . -B $(ASAN_BUILD) -DTPLUA_SANITIZE=ON -DTPLUA_WERROR=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

lint: deps
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')
	luacheck -q .

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

bench: all
	bench/run

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
