# leantune: the two commands of the Quick start (`make demo`, `make test`) do all set-up themselves.
SHELL := /bin/bash
JOBS ?= $(shell nproc)
DEB_PACKAGES := cmake ninja-build g++ ccache pkg-config nlohmann-json3-dev libyaml-cpp-dev libcli11-dev \
                libfmt-dev libopenblas-dev libpcre2-dev libutf8proc-dev libcsv-dev libgtest-dev libgmock-dev \
                libbenchmark-dev openmpi-bin libopenmpi-dev

# `make fuzz` also needs clang and its libFuzzer runtime.
FUZZ_DEB_PACKAGES := clang libclang-rt-14-dev
# `make fuzz` replays a fixed campaign (FUZZ_RUNS inputs per reader from seed FUZZ_SEED): the same inputs on
# any machine, so CI passes or fails on the code, not on luck. `make fuzz-explore` searches for new findings
# with a fresh random seed for FUZZ_SECONDS per reader.
FUZZ_RUNS ?= 40000
FUZZ_SEED ?= 1
FUZZ_SECONDS ?= 300

.PHONY: deps fuzz-deps configure-cpu build-cpu test test-exactness test-asan fuzz fuzz-build fuzz-explore fuzz-corpus cuda test-cuda demo format clean

# Installs the Debian packages the build needs, when they are missing and we are root.
deps fuzz-deps:
	@missing=$$(for p in $(if $(filter fuzz-deps,$@),$(DEB_PACKAGES) $(FUZZ_DEB_PACKAGES),$(DEB_PACKAGES)); do \
	  dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages: $$missing (run 'make deps' as root or install them)"; exit 1; \
	  fi; \
	fi

build/cpu/build.ninja: | deps
	cmake --preset cpu

build-cpu: deps build/cpu/build.ninja
	cmake --build build/cpu -j $(JOBS)

# Every CPU test through ctest, the exactness properties again under each OpenBLAS kernel family and
# thread count, then the file readers again under AddressSanitizer.
test: build-cpu test-asan
	cd build/cpu && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-exactness

# The tests labelled exactness (tests/CMakeLists.txt) with OPENBLAS_CORETYPE unset, Prescott, Haswell and
# SkylakeX, 1 and 2 threads: bit-for-bit claims must not depend on which kernels OpenBLAS picks.
test-exactness: build-cpu
	tools/test_exactness_matrix.sh build/cpu $(JOBS)

test-asan: deps
	@[ -f build/asan/build.ninja ] || cmake --preset asan
	cmake --build build/asan -j $(JOBS) --target test_io
	cd build/asan && ctest --output-on-failure -j $(JOBS) -L io

# libFuzzer harnesses of every file reader (safetensors, config.json, tokenizer files, dataset records,
# adapter_config.json, trainer_state.json) under ASan + UBSan, started from the committed seed corpus
# tests/fuzz/corpus (tools/make_fuzz_corpus.py); a finding fails the target and leaves its input in
# build/fuzz/findings (add it to the corpus once fixed, so every later run replays it).
fuzz-build: fuzz-deps
	@[ -f build/fuzz/build.ninja ] || cmake --preset fuzz
	cmake --build build/fuzz -j $(JOBS)

fuzz: fuzz-build
	bash tests/fuzz/run_fuzzers.sh build/fuzz/bin tests/fuzz/corpus build/fuzz/findings runs $(FUZZ_RUNS) $(FUZZ_SEED)

fuzz-explore: fuzz-build
	bash tests/fuzz/run_fuzzers.sh build/fuzz/bin tests/fuzz/corpus build/fuzz/findings seconds $(FUZZ_SECONDS) 0

# Rewrites the seed corpus (small valid files of every format, a few broken ones).
fuzz-corpus:
	python3 tools/make_fuzz_corpus.py tests/fuzz/corpus

cuda: deps
	@[ -f build/cuda/build.ninja ] || cmake --preset cuda
	cmake --build build/cuda -j $(JOBS)

# On a GPU machine: the CUDA parity tests against the CPU float64 reference, first on leantune's attention
# kernels, then cuDNN's (LT_ATTENTION_KERNEL: the development override of the kernel option attention).
# tools/find_cudnn.sh points LT_CUDNN_LIBRARY at the cuDNN of the machine's PyTorch wheel (unless set);
# without a cuDNN 9.16+ the cuDNN tests check that attention falls back to leantune's kernels and says why.
# The full log (every PARITY row) goes to build/cuda/cuda_parity.log; tools/parity_table.py summarizes it
# for docs/CUDA_PARITY.md.
test-cuda: cuda
	set -o pipefail; source tools/find_cudnn.sh; \
	  echo "cuDNN: $${LT_CUDNN_LIBRARY:-libcudnn.so.9 from the library path}" | tee build/cuda/cuda_parity.log; \
	  LT_ATTENTION_KERNEL=tc ./build/cuda/bin/test_cuda 2>&1 | tee -a build/cuda/cuda_parity.log && \
	  LT_ATTENTION_KERNEL=auto ./build/cuda/bin/test_cuda --gtest_filter='CudaParity.Cudnn*' 2>&1 \
	  | tee -a build/cuda/cuda_parity.log

# The end-to-end demo: a small model and task of the project's own, trained from scratch (demo/demo.sh says
# what each stage shows). With the CUDA toolkit and a visible GPU it builds the CUDA leantune and trains on
# the GPU; otherwise the CPU one. Builds only the leantune binary.
HAVE_GPU := $(shell [ -x /usr/local/cuda/bin/nvcc ] && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo 1)
ifeq ($(HAVE_GPU),1)
DEMO_PRESET := cuda
else
DEMO_PRESET := cpu
endif
demo: deps
	@[ -f build/$(DEMO_PRESET)/build.ninja ] || cmake --preset $(DEMO_PRESET)
	cmake --build build/$(DEMO_PRESET) -j $(JOBS) --target leantune
	bash demo/demo.sh build/$(DEMO_PRESET)/bin/leantune build/demo

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')

clean:
	rm -rf build
