# leantune: the two commands of the Quick start (`make demo`, `make test`) do all set-up themselves.
SHELL := /bin/bash
JOBS ?= $(shell nproc)
DEB_PACKAGES := cmake ninja-build g++ ccache pkg-config nlohmann-json3-dev libyaml-cpp-dev libcli11-dev \
                libfmt-dev libopenblas-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev \
                libbenchmark-dev

.PHONY: deps configure-cpu build-cpu test test-asan cuda test-cuda demo format clean

# Installs the Debian packages the build needs, when they are missing and we are root.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
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

# Every CPU test through ctest, then the file readers again under AddressSanitizer.
test: build-cpu test-asan
	cd build/cpu && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@[ -f build/asan/build.ninja ] || cmake --preset asan
	cmake --build build/asan -j $(JOBS) --target test_io
	cd build/asan && ctest --output-on-failure -j $(JOBS) -L io

cuda: deps
	@[ -f build/cuda/build.ninja ] || cmake --preset cuda
	cmake --build build/cuda -j $(JOBS)

# On a GPU machine: the CUDA parity tests against the CPU float64 reference, first on leantune's attention
# kernels, then cuDNN's (LT_ATTENTION_KERNEL: the development override of the kernel option attention). The
# full log (every PARITY row) goes to build/cuda/cuda_parity.log; tools/parity_table.py summarizes it for
# docs/CUDA_PARITY.md.
test-cuda: cuda
	set -o pipefail; LT_ATTENTION_KERNEL=tc ./build/cuda/bin/test_cuda 2>&1 | tee build/cuda/cuda_parity.log
	set -o pipefail; LT_ATTENTION_KERNEL=auto ./build/cuda/bin/test_cuda --gtest_filter='CudaParity.Cudnn*' 2>&1 \
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
