# What scripts/gpu-test.sh and the parts it sources (gpu-test-zoo.sh,
# gpu-test-pp.sh) need when each runs on its own: sourced from the
# repository root with BUILD set. Sets FIX, LOOM, UNIT and OUT, the
# bundle's library path, the pass/fail/skip counters and report().
FIX=test/fixtures
LOOM=$BUILD/tools/loom/loom
UNIT=$BUILD/unittests/loom-unittests
OUT=${LOOM_GPU_TEST_OUT:-$(mktemp -d)}
mkdir -p "$OUT"
# A bundle carries the shared libraries its loom needs (protobuf, onnx).
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0 fail=0 skip=0
report() { # name status detail
  printf '%-28s %s  %s\n' "$1" "$2" "$3"
  case $2 in PASS) pass=$((pass + 1)) ;; FAIL) fail=$((fail + 1)) ;; *) skip=$((skip + 1)) ;; esac
}
# True when this machine has a GPU nvidia-smi can list.
have_gpu() { command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; }
