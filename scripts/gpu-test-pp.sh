# Pipeline parallelism on the CUDA backend (issue 15): sourced by
# scripts/gpu-test.sh (its `report`, $LOOM, $UNIT, $OUT, $FIX), or on its
# own, for these rows alone:
#
#   bash scripts/gpu-test-pp.sh [BUILD]
#
# Per model (the zoo's 4-layer llama, qwen2 and gpt2), one row, pp-<m>-cuda:
# pp=2 and pp=4 under every schedule (gpipe, 1f1b, interleaved, zb, ZBV)
# and pp=2 with dp_shard=2, tp=2 and dp_replicate=2, M = 4 or 8, as
# simulated ranks on the GPU (stage activations and gradients moved GPU to
# GPU by the device-memory communicator), fp32, 20 steps:
#  - each plan within 1e-5 relative loss of the one-rank CUDA run at every
#    step, step-0 gradients within 1e-5 relative L2 (loom verify);
#  - each plan's CUDA losses within 1e-5 relative of the same plan on the
#    CPU backend (a second loom verify, --backend cpu).
# pp-llama-memory: `loom train --backend cuda` of pp=2 1F1B and GPipe with
# M=8: the saved activations each rank held at once on the device, measured,
# equal the schedule's prediction (the one `loom plan` counts), and the
# per-rank device report lists the stage tensors' peak (at least those).
# On its own it also runs the unit tests of the pieces (PipelineCuda.*,
# PointToPoint.DeviceMemory*: stream-ordered send/recv, programs sharing a
# rank, device buffers feeding the executors).

pp_standalone=
if ! declare -F report > /dev/null; then
  set -uo pipefail
  pp_standalone=1
  BUILD=${1:-build}
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  source scripts/gpu-test-common.sh
  if ! have_gpu; then
    echo "gpu-test-pp: no GPU on this machine; the pipeline checks are skipped"
    exit 0
  fi
  if "$UNIT" --gtest_filter='PipelineCuda.*:PointToPoint.DeviceMemory*' > "$OUT/pp-unit.log" 2>&1 &&
     ! grep -q '^\[  SKIPPED \]' "$OUT/pp-unit.log"; then
    report pp-unit PASS "$(grep -c '^\[       OK \]' "$OUT/pp-unit.log") tests of the pipeline's GPU pieces"
  else
    report pp-unit FAIL "see below"; grep -E 'FAILED|Failure|error|SKIPPED' "$OUT/pp-unit.log" | head -20
  fi
fi

PP_ZOO=$OUT/zoo
if [ ! -f "$PP_ZOO/reference.json" ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$FIX/zoo.tar.xz" "$OUT" || echo "gpu-test: cannot unpack $FIX/zoo.tar.xz"
fi
# The plans of test/integration/pp-verify-<m>.test (the CPU's check 1).
PP_PLANS="1 pp=2,pp_schedule=gpipe,microbatches=4 pp=2,pp_schedule=1f1b,microbatches=8
  pp=2,pp_schedule=interleaved,microbatches=4 pp=2,pp_schedule=zb,microbatches=8
  pp=2,pp_schedule=zb,pp_virtual=2,microbatches=4 pp=4,pp_schedule=gpipe,microbatches=8
  pp=4,pp_schedule=1f1b,microbatches=4 pp=4,pp_schedule=interleaved,microbatches=8
  pp=4,pp_schedule=zb,microbatches=8 pp=4,pp_schedule=zb,pp_virtual=2,microbatches=4
  pp=2,dp_shard=2,microbatches=4 pp=2,tp=2,pp_schedule=zb,microbatches=4
  pp=2,dp_replicate=2,pp_schedule=interleaved,microbatches=4"
for m in llama qwen2 gpt2; do
  common=(--plans $PP_PLANS --data "$FIX/corpus.u16.bin" --batch 8 --seq 64 --steps 20 --batching fixture
          --warmup 5 --init-weights "$PP_ZOO/$m-l4.init.safetensors")
  res=
  if "$LOOM" verify "$PP_ZOO/$m-l4.dynamic.onnx" "${common[@]}" --backend cuda --json "$OUT/pp-$m-cuda.json" \
       --max-loss-rel 1e-5 --max-grad-rel 1e-5 > "$OUT/pp-$m-cuda.log" 2>&1 &&
     "$LOOM" verify "$PP_ZOO/$m-l4.dynamic.onnx" "${common[@]}" --backend cpu --json "$OUT/pp-$m-cpu.json" \
       > "$OUT/pp-$m-cpu.log" 2>&1 &&
     res=$(python3 -c "
import json, sys
gpu = json.load(open(sys.argv[1]))['plans']; cpu = {p['plan']: p['loss'] for p in json.load(open(sys.argv[2]))['plans']}
vs_cpu = max(abs(x - y) / abs(y) for p in gpu for x, y in zip(p['loss'], cpu[p['plan']]))
print('%d plans x 20 steps vs one rank: worst relative loss %.2e, step-0 gradient %.2e; vs the cpu backend: %.2e' % (
    len(gpu) - 1, max(p['max_rel_loss_diff'] for p in gpu), max(p['worst_grad_rel_l2'] for p in gpu), vs_cpu))
sys.exit(0 if len(gpu) == 14 and set(cpu) == {p['plan'] for p in gpu} and vs_cpu <= 1e-5 else 1)" \
           "$OUT/pp-$m-cuda.json" "$OUT/pp-$m-cpu.json"); then
    report "pp-$m-cuda" PASS "$res"
  else
    report "pp-$m-cuda" FAIL "${res:-$(grep -hE '^FAIL|error' "$OUT/pp-$m-cuda.log" "$OUT/pp-$m-cpu.log" | head -3 | tr '\n' ';')}"
  fi
done
# Device activation memory follows the schedule: each rank's peak of saved
# activations held on the GPU equals the schedule's in-flight prediction.
res= detail=
for sched in 1f1b gpipe; do
  r=
  log="$OUT/pp-llama-memory-$sched.log"
  if "$LOOM" train "$PP_ZOO/llama-l4.dynamic.onnx" --backend cuda --data "$FIX/corpus.u16.bin" --batch 8 \
       --seq 64 --steps 3 --batching fixture --init-weights "$PP_ZOO/llama-l4.init.safetensors" \
       --plan pp=2,pp_schedule=$sched,microbatches=8 > "$log" 2>&1 &&
     r=$(python3 -c "
import re, sys
text = open(sys.argv[1]).read()
rows = re.findall(r'rank (\d+): (\d+) B \((\d+) B, (\d+) microbatch', text)
# The device report: executors' bytes | stage tensors at peak | measured.
dev = re.findall(r'rank (\d+): \d+ \d+ \d+ \d+ \| (\d+) \| (\d+)', text)
ok = len(rows) == 2 and all(int(m) == int(p) for _, m, p, _ in rows) and len(dev) == 2 and all(
    int(d[1]) >= int(r[1]) for d, r in zip(dev, rows))
print('$sched: ' + ', '.join('rank %s %s B held (predicted %s, %s in flight)' % r for r in rows) +
      ' (device stage tensors at peak: %s)' % ', '.join(d[1] + ' B' for d in dev))
sys.exit(0 if ok else 1)" "$log"); then
    detail+="$r; "
  else
    res=FAIL detail+="${r:-$(tail -1 "$log")}; "
  fi
done
report pp-llama-memory "${res:-PASS}" "$detail"

if [ -n "$pp_standalone" ]; then
  echo "gpu-test-pp: logs in $OUT"
  echo "$pass passed, $fail failed, $skip skipped"
  [ $fail -eq 0 ]
fi
