#!/usr/bin/env bash
# loom beside torch.compile on four shapes of different families, in one call
# on the GPU machine, with loom plan's one-GPU prediction next to each
# measured step:
#
#   bench/gpu/suite.sh BUNDLE [SHAPE...]
#
# BUNDLE is scripts/build-gpu-bundle.sh's folder. SHAPEs (suite_models.py;
# default all four): llama-1b (Llama-3.2-1B, B=4 T=2048), qwen2.5-1.5b (qkv
# biases, head dim 128, vocabulary 151,936), qwen3-1.7b (vocabulary 151,936,
# q/k norms), gpt2-large (774M: LayerNorm, gelu, biased Conv1D, B=8 T=1024).
# Every step is 8192 tokens of bf16 autocast with AdamW and clipping.
# With LOOM_BENCH_TORCH_CACHE=PREFIX, PyTorch compiles from the caches that
# bench/gpu/torch_cache.sh saved in an earlier call (PREFIX.00, ...): the
# four shapes then fit one call (469 s on an H100), about 12 minutes without.
#   1. export each shape (fp32 random weights, eager attention) on the CPU,
#      side by side, before anything is timed (cached in $LOOM_BENCH_DIR);
#   2. per shape: `loom plan --gpus 1` with the calibrated H100 profile (the
#      one-GPU bf16 plan's step time and memory); `loom train` for
#      W + N steps (LOOM_BENCH_WARMUP, default 3, and LOOM_BENCH_TIMED,
#      default 8; tokens/s: PyTorch's window, the tokens of steps W to
#      W + N - 1 over their time, as torch_suite.py times N steps after W
#      warm-up ones; LOOM_BENCH_WARMUP=20 LOOM_BENCH_TIMED=10 times both
#      sides past the card's power transient, 2026-11-29-h);
#      loom's own memory figure); torch_suite.py compile on the same
#      corpus windows step by step (tokens/s, PyTorch's allocator peak;
#      it timed one random batch before 2026-11-28-d, whose loss does not
#      fall as the corpus's does); each run under peak_mem.py, the whole process's peak
#      as nvidia-smi reports it;
#      with LOOM_BENCH_CUDA_PROFILE=1 also two steps under LOOM_CUDA_PROFILE=1
#      and plan_vs_profile.py: the plan's time per opcode class beside the
#      kernels' ($LOOM_BENCH_PROFILE picks the profile the plan prices with);
#   3. one table (bench/gpu/suite_table.py; also WORK/table.txt after each
#      shape, so a run cut short keeps its finished rows): tokens/s and their ratio, MFU, nvidia-smi peak memory of
#      both (and their ratio), loom's and PyTorch's own memory figures, and
#      the plan's predicted step time and memory against the measured ones.
# MFU is torch_bench.py's formula (6 N + 6 L H D T FLOPs per token over 989
# TFLOP/s) for both sides.
set -uo pipefail
BUNDLE=${1:?bundle folder}
shift
SHAPES=("$@")
[ ${#SHAPES[@]} -eq 0 ] && SHAPES=(llama-1b qwen2.5-1.5b qwen3-1.7b gpt2-large)
WARMUP=${LOOM_BENCH_WARMUP:-3}
TIMED=${LOOM_BENCH_TIMED:-8}
export LOOM_BENCH_WARMUP=$WARMUP LOOM_BENCH_TIMED=$TIMED # suite_table.py's window
STEPS=${LOOM_BENCH_STEPS:-$(( WARMUP + TIMED ))} # older calls set the steps alone
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=${LOOM_BENCH_DIR:-/tmp/loom-suite}
PROFILE=${LOOM_BENCH_PROFILE:-planner/profiles/h100.calibrated.json}
mkdir -p "$WORK"
LOOM=$BUNDLE/tools/loom/loom
# PyTorch's compile caches from an earlier call (bench/gpu/torch_cache.sh),
# if given: its timed steps run after warm-up either way.
if [ -n "${LOOM_BENCH_TORCH_CACHE:-}" ]; then
  rm -rf /tmp/loom-torch-cache && mkdir -p /tmp/loom-torch-cache # torch_cache.sh's path
  cat "$LOOM_BENCH_TORCH_CACHE".* | xz -dc | tar xf - -C /tmp/loom-torch-cache &&
    export TORCHINDUCTOR_CACHE_DIR=/tmp/loom-torch-cache/inductor-cache &&
    echo "suite: PyTorch compiles from $LOOM_BENCH_TORCH_CACHE.* ($(du -sh $TORCHINDUCTOR_CACHE_DIR | cut -f1))"
fi
start=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

shape_bt() { # SHAPE -> "B T"
  python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); from suite_models import SHAPES
s = SHAPES[sys.argv[1]]; print(s['batch'], s['seq'])" "$1"
}

# 1. Exports, side by side on the CPU ($LOOM_BENCH_EXPORT_JOBS at a time,
# default 2: each holds its fp32 model and the exporter's copies in RAM).
JOBS=${LOOM_BENCH_EXPORT_JOBS:-2}
pids=()
for s in "${SHAPES[@]}"; do
  if [ ! -f "$WORK/$s/model.onnx" ]; then
    timeout 420 python3 bench/gpu/export_model.py "$s" "$WORK/$s" > "$WORK/export-$s.txt" 2>&1 &
    pids+=($!)
    if [ ${#pids[@]} -ge "$JOBS" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
for s in "${SHAPES[@]}"; do tail -1 "$WORK/export-$s.txt" 2>/dev/null; done
echo "suite: exports done at $(( $(date +%s) - start )) s"

# 2. Per shape: the plan, loom, PyTorch.
for s in "${SHAPES[@]}"; do
  read -r B T < <(shape_bt "$s")
  model="$WORK/$s/model.onnx"
  [ -f "$model" ] || { echo "suite: $s was not exported: $(tail -2 "$WORK/export-$s.txt")"; continue; }
  timeout 180 "$LOOM" plan "$model" --gpus 1 --gpu "$PROFILE" --batch "$B" --seq "$T" \
    --precision bf16 --top 100 --json > "$WORK/plan-$s.json" 2> "$WORK/plan-$s.err" ||
    echo "suite: loom plan $s failed: $(tail -1 "$WORK/plan-$s.err")"
  echo "suite: $s planned at $(( $(date +%s) - start )) s"
  rm -f "$WORK/loom-$s.jsonl"
  timeout 300 python3 bench/gpu/peak_mem.py "$WORK/loom-$s.mem.json" -- \
    "$LOOM" train "$model" --backend cuda --data test/fixtures/corpus.u16.bin --batch "$B" --seq "$T" \
    --steps "$STEPS" --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 --log "$WORK/loom-$s.jsonl" \
    > "$WORK/loom-$s.txt" 2>&1 || echo "suite: loom $s failed: $(tail -2 "$WORK/loom-$s.txt")"
  echo "suite: $s loom trained at $(( $(date +%s) - start )) s"
  if [ "${LOOM_BENCH_CUDA_PROFILE:-0}" = 1 ]; then
    # The plan's time per opcode class beside the kernels' (issue 19 check 3).
    LOOM_CUDA_PROFILE=1 timeout 300 "$LOOM" train "$model" --backend cuda --data test/fixtures/corpus.u16.bin \
      --batch "$B" --seq "$T" --steps 2 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 \
      > "$WORK/profile-$s.txt" 2>&1 || echo "suite: profiled loom $s failed: $(tail -2 "$WORK/profile-$s.txt")"
    python3 bench/gpu/plan_vs_profile.py "$WORK/plan-$s.json" "$WORK/profile-$s.txt" | tee "$WORK/plan-vs-profile-$s.txt"
    echo "suite: $s profiled at $(( $(date +%s) - start )) s"
  fi
  timeout 300 python3 bench/gpu/peak_mem.py "$WORK/torch-$s.mem.json" -- \
    python3 bench/gpu/torch_suite.py "$s" compile "$WARMUP" "$TIMED" test/fixtures/corpus.u16.bin > "$WORK/torch-$s.txt" 2>&1 ||
    echo "suite: torch $s failed: $(tail -2 "$WORK/torch-$s.txt")"
  echo "suite: $s done at $(( $(date +%s) - start )) s"
  python3 bench/gpu/suite_table.py "$WORK" "${SHAPES[@]}" > "$WORK/table.txt" 2>&1
done

# 3. The table (also written after each shape, above).
python3 bench/gpu/suite_table.py "$WORK" "${SHAPES[@]}"
echo "suite: $(( $(date +%s) - start )) s in all; files in $WORK"
