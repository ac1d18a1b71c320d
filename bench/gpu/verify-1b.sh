#!/usr/bin/env bash
# The seeds' experiment with loom's GPU code, every plan's ranks on one GPU
# (issue 14, checks 2 and 3): the Llama-3.2-1B shape with 4 layers (random
# init from export_llama.py), bf16 autocast, B=8 global, T=1024, 100 steps
# on test/fixtures/corpus.u16.bin, the plans
#   1, dp_replicate=2 (DDP), dp_shard=2 (FSDP), tp=2, dp_replicate=2,dp_shard=2
#   (HSDP), dp_shard=2,tp=2, dp_shard=4
# from the same initial weights and batches, each against `1`: mean
# |dloss| <= 1e-3 and max <= 2e-2 (loom verify's bounds). Then, per plan,
# each rank's device memory as `loom train` allocates it beside `loom plan
# --explain`'s prediction for that plan (within 5%), and dp_shard=4's
# parameter, gradient and optimizer bytes per rank against a quarter of
# one rank's.
#
#   bench/gpu/verify-1b.sh BUNDLE [OUT]      (OUT: verify.json, verify.svg, logs)
#
# Simulated ranks share one GPU's compute: the step times say nothing about
# speed (docs/architecture.md).
set -uo pipefail
BUNDLE=${1:?bundle folder}
OUT=${2:-/tmp/loom-verify-1b}
STEPS=${LOOM_VERIFY_STEPS:-100}
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=${LOOM_BENCH_DIR:-/tmp/loom-bench-4l}
mkdir -p "$WORK" "$OUT"
LOOM=$BUNDLE/tools/loom/loom
PLANS=(1 dp_replicate=2 dp_shard=2 tp=2 dp_replicate=2,dp_shard=2 dp_shard=2,tp=2 dp_shard=4)
# LOOM_VERIFY_PLANS overrides the list (e.g. "1 1 dp_shard=2": a second `1`
# measures the run-to-run noise of cuDNN's attention backward, whose dQ is
# summed with atomics); LOOM_VERIFY_SKIP_MEMORY=1 skips the memory phase.
[ -n "${LOOM_VERIFY_PLANS:-}" ] && read -r -a PLANS <<< "$LOOM_VERIFY_PLANS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

if [ ! -f "$WORK/llama-1b.onnx" ]; then
  timeout 200 python3 bench/gpu/export_llama.py "$WORK" --layers 4 || { echo "verify-1b: export failed"; exit 1; }
fi
MODEL=$WORK/llama-1b.onnx
DATA=(--data test/fixtures/corpus.u16.bin --batch 8 --seq 1024)

# Memory first (short runs): what each rank allocates, and the prediction.
for plan in "${PLANS[@]}"; do
  [ "${LOOM_VERIFY_SKIP_MEMORY:-0}" = 1 ] && break
  tag=${plan//[=,]/_}
  timeout 300 "$LOOM" train "$MODEL" --backend cuda "${DATA[@]}" --steps 2 --precision bf16 \
    --plan "$plan" --print-every 1 > "$OUT/mem-$tag.txt" 2>&1 || { echo "verify-1b: loom train --plan $plan failed:"; tail -3 "$OUT/mem-$tag.txt"; }
  dpr=1 dps=1 tp=1
  for kv in ${plan//,/ }; do
    case $kv in dp_replicate=*) dpr=${kv#*=} ;; dp_shard=*) dps=${kv#*=} ;; tp=*) tp=${kv#*=} ;; esac
  done
  world=$((dpr * dps * tp)) rows=$((8 / (dpr * dps)))
  timeout 300 "$LOOM" plan "$MODEL" --gpus $world --gpu h100 --batch $rows --global-batch $rows \
    --seq 1024 --explain "dpr=$dpr,dps=$dps,tp=$tp,cp=1,pp=1,mb=1,ac=none,fp8=off" --json \
    > "$OUT/plan-$tag.json" 2> "$OUT/plan-$tag.err" || { echo "verify-1b: loom plan for $plan failed:"; tail -3 "$OUT/plan-$tag.err"; }
done
[ "${LOOM_VERIFY_SKIP_MEMORY:-0}" = 1 ] || python3 - "$OUT" "${PLANS[@]}" <<'EOF' | tee "$OUT/memory.txt"
import json, re, sys
out, plans = sys.argv[1], sys.argv[2:]
GiB = float(1 << 30)
ok = True
state = {}
print("per-rank device memory, GiB: measured (loom train: allocated by the rank; GPU lost while it was created) "
      "vs loom plan --explain (buffer plan of the rank's program)")
print(f"{'plan':28s} {'rank':>4s} {'allocated':>10s} {'gpu lost':>9s} {'predicted':>10s} {'error':>7s} "
      f"{'analytical':>10s}   predicted parameters/gradients/optimizer/activations/comm/workspace")
for plan in plans:
    tag = re.sub(r"[=,]", "_", plan)
    txt = open(f"{out}/mem-{tag}.txt").read()
    try:
        e = json.load(open(f"{out}/plan-{tag}.json"))["explain"]
    except Exception as ex:
        print(f"{plan}: no plan prediction ({ex})"); ok = False; continue
    mem = e["memory"]
    pred = sum(mem[k] for k in ("params", "grads", "optimizer", "activations", "comm", "workspace"))
    ana = e.get("memory_analytical", mem)
    ana_total = sum(ana[k] for k in ("params", "grads", "optimizer", "activations", "comm", "workspace"))
    rows = re.findall(r"^\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)$",
                      txt, re.M)
    if not rows:
        print(f"{plan}: no per-rank memory in loom train's output"); ok = False; continue
    for r in rows:
        alloc = float(r[7]) * GiB
        err = (alloc - pred) / pred
        ok &= abs(err) <= 0.05
        print(f"{plan:28s} {r[0]:>4s} {alloc / GiB:10.3f} {r[8]:>9s} {pred / GiB:10.3f} {err * 100:6.2f}% {ana_total / GiB:10.3f}   "
              + "/".join(f"{mem[k] / GiB:.3f}" for k in ("params", "grads", "optimizer", "activations", "comm", "workspace")))
    m = re.search(r"memory per rank: parameters (\d+) B, gradients (\d+) B, optimizer state (\d+) B "
                  r"\(one device: (\d+) B, (\d+) B, (\d+) B\)", txt)
    if m:
        state[plan] = [int(x) for x in m.groups()]
q = state.get("dp_shard=4")
if q:
    quarter = all(q[i] * 4 == q[i + 3] for i in range(3))
    ok &= quarter
    print(f"dp_shard=4: parameters/gradients/optimizer per rank {q[0]}/{q[1]}/{q[2]} B = 1/4 of one rank's "
          f"{q[3]}/{q[4]}/{q[5]} B: {'yes' if quarter else 'NO'}")
else:
    print("dp_shard=4: no state bytes found"); ok = False
print("memory check:", "PASS (every rank within 5% of loom plan)" if ok else "FAIL")
EOF

# The seeds' comparison: same weights (the export's), same batches.
timeout 560 "$LOOM" verify "$MODEL" --plans "${PLANS[@]}" --backend cuda --precision bf16 "${DATA[@]}" \
  --steps "$STEPS" --lr "${LOOM_VERIFY_LR:-3e-4}" --warmup 10 --json "$OUT/verify.json" --svg "$OUT/verify.svg" \
  --max-abs-loss 2e-2 --max-mean-abs-loss 1e-3 > "$OUT/verify.txt" 2>&1
st=$?
grep -E "^loom verify|^plan |^[0-9a-z_=,]+ +[0-9]+ |^PASS|^FAIL|error" "$OUT/verify.txt"
echo "verify-1b: loom verify exit $st"
