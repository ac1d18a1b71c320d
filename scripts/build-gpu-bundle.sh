#!/usr/bin/env bash
# Builds what the GPU machine runs, here, into a folder small enough to
# carry there (the GPU machine has CUDA but no MLIR, protobuf or ONNX):
#
#   scripts/build-gpu-bundle.sh [OUT]     (default .carry/gpu)
#
# OUT/tools/loom/loom            loom linked statically against MLIR/LLVM
# OUT/unittests/loom-unittests   the runtime unit tests (CUDA vs CPU)
# OUT/lib/                       the few shared libraries loom still needs
#
# Then, on the GPU machine: make gpu-test BUILD=OUT LOOM_PREBUILT=1
# (.carry/ is ignored by git; name it in the device run's carry list).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.carry/gpu}
BUILD=${LOOM_GPU_BUILD:-build-gpu}
bash scripts/setup.sh
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_STATIC_MLIR=ON \
    -DLOOM_USE_BLAS=OFF > "$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; exit 1; }
fi
cmake --build "$BUILD" --target loom loom-unittests -j "$(nproc)"
rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp/tools/loom" "$OUT.tmp/unittests" "$OUT.tmp/lib"
strip -o "$OUT.tmp/tools/loom/loom" "$BUILD/tools/loom/loom"
strip -o "$OUT.tmp/unittests/loom-unittests" "$BUILD/unittests/loom-unittests"
# Shared libraries that a stock CUDA image lacks: everything loom links
# except the C library, the C++ runtime and CUDA's own (NCCL included:
# the GPU machine has its own, and ours is 200+ MB).
ldd "$BUILD/tools/loom/loom" | awk '/=>/ {print $3}' | while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libgcc_s.so*|libstdc++.so*|ld-linux*|libcublas*|libcudart*|libnccl*) ;;
    *) cp -L "$lib" "$OUT.tmp/lib/" ;;
  esac
done
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
du -sh "$OUT"
