#!/usr/bin/env bash
# The planner's accuracy on the GPU machine, in one call: for each plan,
# `loom plan` predicts the step time and peak memory, `loom train` runs the
# plan with the CUDA backend, and one table row compares them.
#
#   bench/gpu/plan_accuracy.sh BUNDLE PROFILE.json [LAYERS] [CONFIGS...]
#
# BUNDLE is scripts/build-gpu-bundle.sh's folder; PROFILE the hardware
# profile to plan with (planner/profiles/h100.calibrated.json on an H100:
# measured there by `loom calibrate`). The model is the Llama-3.2-1B shape
# (vocab 128256, hidden 2048, 32/8 heads, FFN 8192, tied) with LAYERS
# layers (default 8), exported with random weights by export_llama.py.
# CONFIGS are BxT pairs (default: 1x2048 2x2048 4x2048 8x1024 2x4096
# 1x8192), each a one-GPU plan: bf16 autocast, AdamW, no recompute, no fp8
# (what `loom train` runs today).
#
# Measured: the median step time over the steps after the first two, and
# the device memory loom allocates (arena, constants, scratch, GEMM
# workspace: it allocates nothing else). Predicted: the plan row
# dpr=dps=cp=tp=pp=1, ac=none, fp8=off of `loom plan --json`.
set -uo pipefail
BUNDLE=${1:?bundle folder}
PROFILE=${2:?hardware profile json}
LAYERS=${3:-8}
shift 3 2>/dev/null || shift $#
CONFIGS=("$@")
[ ${#CONFIGS[@]} -eq 0 ] && CONFIGS=(1x2048 2x2048 4x2048 8x1024 2x4096 1x8192)
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=${LOOM_BENCH_DIR:-/tmp/loom-plan-accuracy}
mkdir -p "$WORK"
LOOM=$BUNDLE/tools/loom/loom
MODEL=$WORK/l$LAYERS/llama-1b.onnx
nvidia-smi --query-gpu=name --format=csv,noheader
if [ ! -f "$MODEL" ]; then
  timeout 200 python3 bench/gpu/export_llama.py "$WORK/l$LAYERS" --layers "$LAYERS" ||
    { echo "plan_accuracy: export failed"; exit 1; }
fi
rm -f "$WORK/rows.jsonl"
for cfg in "${CONFIGS[@]}"; do
  B=${cfg%x*}
  T=${cfg#*x}
  "$LOOM" plan "$MODEL" --gpus 1 --gpu "$PROFILE" --batch "$B" --seq "$T" --precision bf16 \
    --top 100 --json > "$WORK/plan-$cfg.json" 2> "$WORK/plan-$cfg.err" ||
    { echo "plan $cfg failed: $(cat "$WORK/plan-$cfg.err")"; continue; }
  rm -f "$WORK/train-$cfg.jsonl"
  timeout 300 "$LOOM" train "$MODEL" --backend cuda --data test/fixtures/corpus.u16.bin \
    --batch "$B" --seq "$T" --steps 6 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 \
    --log "$WORK/train-$cfg.jsonl" > "$WORK/train-$cfg.txt" 2>&1 ||
    { echo "train $cfg failed: $(tail -2 "$WORK/train-$cfg.txt")"; continue; }
  python3 - "$WORK" "$cfg" "$LAYERS" <<'EOF' | tee -a "$WORK/rows.jsonl"
import json, re, statistics, sys
work, cfg, layers = sys.argv[1], sys.argv[2], int(sys.argv[3])
plan = json.load(open(f"{work}/plan-{cfg}.json"))
row = [p for p in plan["plans"] if p["id"].endswith("ac=none,fp8=off") and p["dp_shard"] == 1
       and p["tp"] == 1 and p["pp"] == 1 and p["cp"] == 1 and p["dp_replicate"] == 1][0]
steps = [json.loads(l) for l in open(f"{work}/train-{cfg}.jsonl") if l.strip()]
tok = statistics.median([s["tokens_per_s"] for s in steps[2:]])
B, T = map(int, cfg.split("x"))
step_s = B * T / tok
mem = float(re.search(r"device memory: ([0-9.]+) GiB", open(f"{work}/train-{cfg}.txt").read()).group(1))
pred_mem = row["memory"]["total"] / 2**30
print(json.dumps({"layers": layers, "batch": B, "seq": T,
                  "predicted_step_ms": round(row["time"]["total"] * 1e3, 2),
                  "measured_step_ms": round(step_s * 1e3, 2),
                  "time_error": round(row["time"]["total"] / step_s - 1, 4),
                  "predicted_mem_gib": round(pred_mem, 3), "measured_mem_gib": mem,
                  "memory_error": round(pred_mem / mem - 1, 4),
                  "memory_source": row["memory_source"]}))
EOF
done
python3 - "$WORK" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/rows.jsonl") if l.strip()]
print("| layers | B x T | step ms predicted | measured | error | memory GiB predicted | measured | error |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['layers']} | {r['batch']}x{r['seq']} | {r['predicted_step_ms']:.1f} | {r['measured_step_ms']:.1f} | "
          f"{100 * r['time_error']:+.1f}% | {r['predicted_mem_gib']:.2f} ({r['memory_source']}) | "
          f"{r['measured_mem_gib']:.2f} | {100 * r['memory_error']:+.1f}% |")
ok_t = sum(abs(r["time_error"]) <= 0.15 for r in rows)
ok_m = sum(abs(r["memory_error"]) <= 0.10 for r in rows)
print(f"within 15% on time: {ok_t}/{len(rows)}; within 10% on memory: {ok_m}/{len(rows)}")
EOF
