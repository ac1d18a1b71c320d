#!/usr/bin/env bash
# Runs every test through CTest: the lit suites (one CTest test per suite
# directory) and the GoogleTest unit tests. CTest's closing line is the
# summary CI reads.
set -euo pipefail
BUILD=${1:-build}
if [ "${LOOM_GPU_TESTS:-0}" = "1" ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
    echo "gpu-test: no GPU on this machine; run 'make gpu-test' on the GPU machine"
  fi
  echo "gpu-test: loom has no CUDA backend yet (issue 4), so there are no GPU tests to run."
  echo "0 passed, 0 failed, 0 skipped"
  exit 0
fi
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)"
