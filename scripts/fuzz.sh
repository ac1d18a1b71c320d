#!/usr/bin/env bash
# `make fuzz`: the ONNX importer, the safetensors reader and the program-file
# loader under libFuzzer, with AddressSanitizer and UndefinedBehaviorSanitizer
# on every loom source (MLIR, LLVM and protobuf are the system's, not
# instrumented). Each target runs FUZZ_SECONDS (default 60; the issue's
# acceptance run used 600) from its seed corpus in fuzz/corpus/<target>,
# growing a working corpus in build-fuzz/corpus/<target>; a crash, a leak, a
# sanitizer report, a timeout (> 10 s on one input) or an input needing
# > 2 GiB ends that target with its reproducer saved as
# build-fuzz/artifacts/<target>/crash-*, and the script exits non-zero.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (targets: onnx safetensors artifact)
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-${FUZZ_SECONDS:-60}}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(safetensors artifact onnx)
BUILD=${LOOM_FUZZ_BUILD:-build-fuzz}
bash scripts/setup.sh
dpkg-query -W -f='${Status}' clang libclang-rt-14-dev 2>/dev/null | grep -c "install ok installed" | grep -q 2 || {
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
}
SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_FUZZ=ON \
    -DLOOM_ENABLE_CUDA=OFF -DLOOM_USE_BLAS=OFF -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
    > "$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; exit 1; }
fi
declare -A EXE=([onnx]=loom-fuzz-OnnxImport [safetensors]=loom-fuzz-Safetensors [artifact]=loom-fuzz-Artifact)
want=()
for t in "${TARGETS[@]}"; do want+=("${EXE[$t]:?unknown fuzz target $t}"); done
cmake --build "$BUILD" --target "${want[@]}" -j "$(nproc)" || exit 1
status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD/corpus/$t" "$BUILD/artifacts/$t"
  log="$BUILD/fuzz-$t.log"
  echo "fuzz $t: $SECONDS_EACH s"
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    "$BUILD/fuzz/${EXE[$t]}" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$BUILD/artifacts/$t/" -print_final_stats=1 \
    "$BUILD/corpus/$t" "fuzz/corpus/$t" > "$log" 2>&1
  st=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if [ $st -eq 0 ]; then
    echo "fuzz $t: PASS, ${runs:-?} inputs, $cov, no crash, hang or sanitizer report"
  else
    status=1
    echo "fuzz $t: FAIL (exit $st): $(grep -m1 -E 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log")"
    ls "$BUILD/artifacts/$t"
  fi
done
exit $status
