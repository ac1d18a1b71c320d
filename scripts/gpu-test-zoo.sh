# The model zoo (test/fixtures/zoo.tar.xz, 20 transformers families and
# 4-layer llama/qwen2/gpt2) on the CUDA backend: sourced by
# scripts/gpu-test.sh (its `report`, $LOOM, $OUT, $FIX), or on its own:
#
#   bash scripts/gpu-test-zoo.sh [BUILD]
#
# Per family, from the export it trains from (scripts/fixtures/zoo_families.py):
#  - zoo-<m>-fp32: the 50-step fp32 curve within 2e-3 of PyTorch's, grad
#    norms within 1%;
#  - zoo-<m>-bf16: the bf16 (autocast) curve within 2e-2 (except steps where
#    PyTorch's own fp32 and bf16 runs differ by more: check_curve.py);
#  - zoo-<m>-spmd: dp_shard=2,tp=2 as four simulated ranks on the GPU
#    against one rank (loom verify --backend cuda, fp32, 20 steps), losses
#    and step-0 gradients within 1e-5 relative.
# LOOM_GPU_TEST_ZOO_ROWS="spmd" (or "fp32 bf16", ...) limits the rows per
# family (default: all three).
# LOOM_GPU_TEST_ZOO="llama gemma2 ..." limits the families (default: all;
# "none" skips them, for a `make gpu-test` that leaves the zoo to a call of
# its own).

standalone=
if ! declare -F report > /dev/null; then # run on its own
  set -uo pipefail
  standalone=1
  BUILD=${1:-build}
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  source scripts/gpu-test-common.sh
  if ! have_gpu; then
    echo "gpu-test-zoo: no GPU on this machine; the zoo's checks are skipped"
    exit 0
  fi
fi

ZOO=$OUT/zoo
if [ ! -f "$ZOO/reference.json" ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$FIX/zoo.tar.xz" "$OUT" || echo "gpu-test: cannot unpack $FIX/zoo.tar.xz"
fi
while read -r m export; do
  case " ${LOOM_GPU_TEST_ZOO:-$m} " in *" $m "*) ;; *) continue ;; esac
  model="$ZOO/$m.$export.onnx"
  init=(--init-weights "$ZOO/$m.init.safetensors")
  rows=" ${LOOM_GPU_TEST_ZOO_ROWS:-fp32 bf16 spmd} "
  for prec in fp32 bf16; do
    case "$rows" in *" $prec "*) ;; *) continue ;; esac
    jl="$OUT/zoo-$m-$prec.jsonl"
    rm -f "$jl"
    bound=2e-3 extra=(--grad-norm-rel 0.01)
    [ $prec = bf16 ] && bound=2e-2 extra=(--skip-unstable 2e-2)
    if "$LOOM" train "$model" --backend cuda --data "$FIX/corpus.u16.bin" --batch 4 --seq 64 --steps 50 \
         --batching fixture --warmup 5 --precision $prec "${init[@]}" --log "$jl" \
         > "$OUT/zoo-$m-$prec.log" 2>&1; then
      res=$(python3 test/integration/Inputs/check_curve.py "$jl" "$ZOO/reference.json" $m $prec \
            --max-loss-diff $bound "${extra[@]}")
      [ $? -eq 0 ] && report "zoo-$m-$prec" PASS "$res" || report "zoo-$m-$prec" FAIL "$res"
    else
      report "zoo-$m-$prec" FAIL "$(tail -1 "$OUT/zoo-$m-$prec.log")"
    fi
  done
  case "$rows" in *" spmd "*) ;; *) continue ;; esac
  if "$LOOM" verify "$model" --plans 1 dp_shard=2,tp=2 --backend cuda --data "$FIX/corpus.u16.bin" \
       --batch 4 --seq 64 --steps 20 --batching fixture --warmup 5 "${init[@]}" \
       --json "$OUT/zoo-$m-spmd.json" --max-loss-rel 1e-5 --max-grad-rel 1e-5 > "$OUT/zoo-$m-spmd.log" 2>&1; then
    report "zoo-$m-spmd" PASS "$(python3 -c "
import json, sys
p = json.load(open(sys.argv[1]))['plans'][1]
print('dp_shard=2,tp=2 vs 1, 20 steps: relative loss %.2e, step-0 gradient %.2e' % (
    p['max_rel_loss_diff'], p['worst_grad_rel_l2']))" "$OUT/zoo-$m-spmd.json")"
  else
    report "zoo-$m-spmd" FAIL "$(grep -E '^FAIL|error' "$OUT/zoo-$m-spmd.log" | head -3 | tr '\n' ';')"
  fi
done < <(python3 scripts/fixtures/zoo_families.py "$ZOO/reference.json" 2>/dev/null ||
         echo "zoo-unpack missing")
if [ -n "$standalone" ]; then
  echo "gpu-test-zoo: logs in $OUT"
  echo "$pass passed, $fail failed, $skip skipped"
  [ $fail -eq 0 ]
fi
