#!/usr/bin/env bash
# The compiler/runtime split, checked (issue 20):
#   1. nothing under runtime/ includes MLIR, LLVM or a compiler-side
#      directory (ir, passes, codegen, compiler, frontends, planner, tools);
#   2. tools/loom/ stays argument parsing and printing: at most 1,500 lines;
#   3. the runtime (LoomRuntime and the training runtime LoomTrain)
#      configures, builds and links into a program with
#      -DLOOM_ENABLE_COMPILER=OFF, where MLIR is never looked for, in a
#      scratch folder (ccache keeps it to a minute or two).
#
#   scripts/check-layering.sh [SCRATCH]   (default: a temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."

bad=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](mlir|llvm|ir|passes|codegen|compiler|frontends|planner|tools)/' \
        runtime || true)
if [ -n "$bad" ]; then
  echo "check-layering: runtime/ includes compiler-side headers:"
  echo "$bad"
  exit 1
fi
echo "check-layering: runtime/ includes no MLIR, LLVM or compiler-side header"

lines=$(cat tools/loom/* | wc -l)
if [ "$lines" -gt 1500 ]; then
  echo "check-layering: tools/loom/ holds $lines lines (at most 1500: logic belongs in the libraries)"
  exit 1
fi
echo "check-layering: tools/loom/ holds $lines lines (at most 1500)"

SCRATCH=${1:-}
if [ -z "$SCRATCH" ]; then
  SCRATCH=$(mktemp -d)
  trap 'rm -rf "$SCRATCH"' EXIT
fi
cmake -S . -B "$SCRATCH" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_ENABLE_COMPILER=OFF \
  > "$SCRATCH.configure.log" 2>&1 || { cat "$SCRATCH.configure.log"; exit 1; }
rm -f "$SCRATCH.configure.log"
if grep -E '^(MLIR_DIR|LLVM_DIR):' "$SCRATCH/CMakeCache.txt" | grep -qv NOTFOUND; then
  echo "check-layering: the runtime-only configuration looked up MLIR or LLVM"
  exit 1
fi
cmake --build "$SCRATCH" --target loom-train-link-check -j "${LOOM_CHECK_JOBS:-2}" > "$SCRATCH/build.log" 2>&1 ||
  { tail -40 "$SCRATCH/build.log"; exit 1; }
"$SCRATCH/runtime/train/loom-train-link-check"
echo "check-layering: LoomRuntime and LoomTrain build and link with LOOM_ENABLE_COMPILER=OFF"
