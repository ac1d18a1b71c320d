# loom — the two set-up-and-go commands: `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all setup configure build demo test gpu-test fuzz clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja: CMakeLists.txt
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release > $(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)

configure: setup $(BUILD)/build.ninja

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

test: build
	@bash scripts/run-tests.sh $(BUILD)

# The CUDA parity suite (scripts/gpu-test.sh). On the GPU machine, which has
# no MLIR, run it on a bundle: make gpu-test BUILD=.carry/gpu LOOM_PREBUILT=1
gpu-test:
	@if [ -z "$(LOOM_PREBUILT)" ]; then $(MAKE) --no-print-directory build; fi
	@bash scripts/gpu-test.sh $(BUILD)

# libFuzzer on the ONNX importer, the safetensors reader and the program
# loader (scripts/fuzz.sh): FUZZ_SECONDS per target (default 60).
fuzz:
	@bash scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
