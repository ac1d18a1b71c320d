#!/usr/bin/env bash
# `make gpu-test`: the parity tests of the training issue on the CUDA
# backend, plus every CUDA kernel against the CPU reference.
#
#   scripts/gpu-test.sh [BUILD]     (BUILD holds tools/loom/loom and
#                                    unittests/loom-unittests)
#
# On a machine without a usable GPU every check is reported as skipped.
# The GPU machine has no MLIR, so there BUILD is a bundle made here by
# scripts/build-gpu-bundle.sh (a loom linked statically against MLIR); the
# checks need only python3 and the fixtures in test/fixtures.
#
# Checks (each one line, PASS/FAIL):
#  - loom-unittests, CudaBackend.* and CudaMixedDtype.*: every kernel vs
#    the CPU backend, and on bf16 storage vs the unfused casts;
#  - per model (llama, qwen2, gpt2) and export variant: step-0 loss within
#    1e-5 relative of PyTorch's fp64 loss and every gradient within 1e-4
#    relative L2 (--backend cuda);
#  - per model: 50-step curves, fp32 within 2e-3 and grad norms within 1%,
#    bf16 within 2e-2 of PyTorch's recorded curves (except steps where
#    PyTorch's fp32 and bf16 runs differ by more than that: GPT-2's 43-44);
#  - per model: the bf16 curve on loom's own attention kernels
#    (LOOM_CUDNN=0, sibling input-gradient GEMMs apart) within the same bound; cuDNN's attention backward adds
#    dQ with atomics, so bit-for-bit checks run on loom's kernels:
#  - device-ranks: DeviceMemoryCommunicator.* (every collective of simulated
#    ranks on one GPU equals the CPU's bit for bit, overlap, a failing rank,
#    the memory check before allocating), PointToPoint.DeviceMemory*
#    (the pipeline's grouped send/recv between them) and PipelineCuda.*
#    (send/recv ordered by streams alone, programs sharing a rank's
#    collectives, device buffers feeding the executors);
#  - tensorboard-reader: TensorBoard's EventAccumulator reads every
#    scalar of every step of `loom train --tensorboard` (CUDA run);
#  - nccl-world-1: the NCCL communicator as a world of one (rendezvous,
#    every collective opcode, async-error polling, abort, a send/recv group
#    to itself: PointToPoint.Nccl*);
#  - per model: spmd-<m>-cuda, the plans 1, dp_replicate=2, dp_shard=2,
#    tp=2, dp_replicate=2,dp_shard=2, dp_shard=2,tp=2 and dp_shard=4 as
#    simulated ranks on the GPU (loom verify --backend cuda), fp32, 20 steps:
#    each within 1e-5 relative loss of the one-rank CUDA run and step-0
#    gradients within 1e-5 relative L2; spmd-<m>-cpu-vs-cuda, each plan's
#    CUDA losses within 1e-4 relative of the same plan on the CPU backend;
#  - per model: seqpar-<m>-cuda, context parallelism (cp=2, cp=4 with
#    both rotations, cp=2 x tp=2) and tp=2/tp=4 with sequence and loss
#    parallelism as simulated ranks on the GPU, fp32, 20 steps, within
#    1e-5 relative loss and step-0 gradients of the one-rank CUDA run
#    (issue 18; their kernels are checked against the CPU in "unit");
#  - per model: ac-<m>-<precision>, activation checkpointing on the GPU
#    (loom's own attention, LOOM_CUDNN=0): 20 steps with --ac full,
#    selective and budget give the same loss, grad norm and lr bits and the
#    same exported weights as --ac none, fp32 and bf16; ac-llama-<plan>,
#    the same under dp_shard=2 and tp=2 as simulated ranks on the GPU;
#  - per model: the bf16 curve with autocast's casts left unfolded
#    (LOOM_FOLD_CASTS=0), the one with the gradient norm and clip left
#    unfused (LOOM_FUSE_GRAD_CLIP=0), and the one with each small AdamW
#    launched alone (LOOM_GROUP_ADAMW=0), have exactly the same losses and
#    grad norms as the LOOM_CUDNN=0 curve;
#  - per model (scripts/gpu-test-pp.sh): pp-<m>-cuda, pipeline plans (pp=2
#    and pp=4 under every schedule, pp=2 with dp_shard/tp/dp_replicate=2)
#    as simulated ranks on the GPU, fp32, 20 steps, within 1e-5 of the
#    one-rank CUDA run and of the CPU backend's run of each plan;
#    pp-llama-memory, device-held activations equal the schedule's;
#  - per zoo family (scripts/gpu-test-zoo.sh): fp32 and bf16 curves, and
#    dp_shard=2,tp=2 on simulated ranks against one rank.
set -uo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
source scripts/gpu-test-common.sh

checks=(unit device-ranks nccl-world-1 tensorboard-reader)
SPMD_PLANS="1 dp_replicate=2 dp_shard=2 tp=2 dp_replicate=2,dp_shard=2 dp_shard=2,tp=2 dp_shard=4"
SEQPAR_PLANS="1 cp=2 cp=2,cp_rotate=ring cp=4 cp=4,cp_rotate=ring cp=2,tp=2 tp=2 tp=4"
for m in llama qwen2 gpt2; do
  checks+=("spmd-$m-cuda" "spmd-$m-cpu-vs-cuda" "seqpar-$m-cuda")
  for v in static dynamic dynamic-noopt; do checks+=("grads-$m-$v"); done
  checks+=("curve-$m-fp32" "curve-$m-bf16" "curve-$m-bf16-loomattn" "fold-$m-bf16" "gradclip-$m-bf16"
           "groupadamw-$m-bf16")
  checks+=("ac-$m-fp32" "ac-$m-bf16")
done
checks+=("ac-llama-dp_shard=2" "ac-llama-tp=2")
checks+=(pp-llama-cuda pp-qwen2-cuda pp-gpt2-cuda pp-llama-memory)
# The zoo (gpu-test-zoo.sh): 23 models x (fp32 curve, bf16 curve, dp_shard=2,tp=2).
for i in $(seq 69); do checks+=("zoo-$i"); done

if ! have_gpu; then
  echo "gpu-test: no GPU on this machine; the ${#checks[@]} GPU checks are skipped"
  echo "0 passed, 0 failed, ${#checks[@]} skipped"
  exit 0
fi
for f in "$LOOM" "$UNIT"; do
  [ -x "$f" ] || { echo "gpu-test: $f is missing (run 'make build', or unpack a GPU bundle)"; exit 1; }
done
nvidia-smi -L

if "$UNIT" --gtest_filter='CudaBackend.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*' > "$OUT/unit.log" 2>&1; then
  report unit PASS "$(grep -c '^\[       OK \]' "$OUT/unit.log") CUDA kernel tests"
else
  report unit FAIL "see below"; grep -E 'FAILED|Failure|error|seed' "$OUT/unit.log" | head -20
fi

if "$UNIT" --gtest_filter='DeviceMemoryCommunicator.*:PointToPoint.DeviceMemory*:PipelineCuda.*' > "$OUT/device-ranks.log" 2>&1; then
  report device-ranks PASS "$(grep -c '^\[       OK \]' "$OUT/device-ranks.log") tests of simulated ranks on one GPU"
else
  report device-ranks FAIL "see below"; grep -E 'FAILED|Failure|error' "$OUT/device-ranks.log" | head -20
fi
if env NCCL_NVLS_ENABLE=0 "$UNIT" --gtest_filter='NcclCommunicator.*:PointToPoint.Nccl*' > "$OUT/nccl.log" 2>&1 &&
   grep -q '^\[       OK \]' "$OUT/nccl.log"; then
  report nccl-world-1 PASS "world of one: every collective opcode, send/recv, abort ($(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2.* 2>/dev/null | sed 's/.*libnccl.so.//' | head -1))"
else
  report nccl-world-1 FAIL "see below"; grep -E 'FAILED|Failure|error|SKIPPED' "$OUT/nccl.log" | head -20
fi

# TensorBoard's own reader (the package is on the GPU machine, not in CI)
# finds every scalar of every step of a CUDA run's event file.
rm -rf "$OUT/tb" "$OUT/tb.jsonl"
if "$LOOM" train "$FIX/llama.dynamic.onnx" --backend cuda --data "$FIX/corpus.u16.bin" --batch 4 --seq 64 \
     --steps 10 --batching fixture --log "$OUT/tb.jsonl" --tensorboard "$OUT/tb" > "$OUT/tb.log" 2>&1 &&
   res=$(python3 test/integration/Inputs/check_tensorboard.py "$OUT/tb" "$OUT/tb.jsonl" --tensorboard 2>&1); then
  report tensorboard-reader PASS "$res"
else
  report tensorboard-reader FAIL "${res:-$(tail -1 "$OUT/tb.log")}"
fi

# Every plan's ranks on the one GPU against the one-rank CUDA run, and each
# plan's CUDA run against the same plan on the CPU backend.
for m in llama qwen2 gpt2; do
  common=(--plans $SPMD_PLANS --data "$FIX/corpus.u16.bin" --batch 4 --seq 64 --steps 20 --batching fixture
          --warmup 5 --init-weights "$FIX/$m.init.safetensors")
  if "$LOOM" verify "$FIX/$m.dynamic.onnx" "${common[@]}" --backend cuda --json "$OUT/spmd-$m-cuda.json" \
       --svg "$OUT/spmd-$m-cuda.svg" --max-loss-rel 1e-5 --max-grad-rel 1e-5 > "$OUT/spmd-$m-cuda.log" 2>&1; then
    report "spmd-$m-cuda" PASS "$(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['plans']
print('7 plans x 20 steps; worst relative loss %.2e, worst step-0 gradient %.2e' % (
    max(p['max_rel_loss_diff'] for p in r), max(p['worst_grad_rel_l2'] for p in r)))" "$OUT/spmd-$m-cuda.json")"
  else
    report "spmd-$m-cuda" FAIL "$(grep -E '^FAIL|error' "$OUT/spmd-$m-cuda.log" | head -3 | tr '\n' ';')"
  fi
  if "$LOOM" verify "$FIX/$m.dynamic.onnx" "${common[@]}" --backend cpu --json "$OUT/spmd-$m-cpu.json" \
       > "$OUT/spmd-$m-cpu.log" 2>&1 && [ -f "$OUT/spmd-$m-cuda.json" ] &&
     res=$(python3 -c "
import json, sys
a = {p['plan']: p['loss'] for p in json.load(open(sys.argv[1]))['plans']}
b = {p['plan']: p['loss'] for p in json.load(open(sys.argv[2]))['plans']}
worst = max(abs(x - y) / abs(y) for k in a for x, y in zip(a[k], b[k]))
print('cuda vs cpu, every plan and step: worst relative loss difference %.2e' % worst)
sys.exit(0 if set(a) == set(b) and worst <= 1e-4 else 1)" "$OUT/spmd-$m-cuda.json" "$OUT/spmd-$m-cpu.json"); then
    report "spmd-$m-cpu-vs-cuda" PASS "$res"
  else
    report "spmd-$m-cpu-vs-cuda" FAIL "${res:-$(tail -1 "$OUT/spmd-$m-cpu.log")}"
  fi
done

# Context, sequence and loss parallelism on the GPU (issue 18).
for m in llama qwen2 gpt2; do
  if "$LOOM" verify "$FIX/$m.dynamic.onnx" --plans $SEQPAR_PLANS --data "$FIX/corpus.u16.bin" --batch 4 \
       --seq 64 --steps 20 --batching fixture --warmup 5 --init-weights "$FIX/$m.init.safetensors" \
       --backend cuda --json "$OUT/seqpar-$m-cuda.json" --max-loss-rel 1e-5 --max-grad-rel 1e-5 \
       > "$OUT/seqpar-$m-cuda.log" 2>&1; then
    report "seqpar-$m-cuda" PASS "$(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['plans']
print('%d plans x 20 steps; worst relative loss %.2e, worst step-0 gradient %.2e' % (
    len(r), max(p['max_rel_loss_diff'] for p in r), max(p['worst_grad_rel_l2'] for p in r)))" "$OUT/seqpar-$m-cuda.json")"
  else
    report "seqpar-$m-cuda" FAIL "$(grep -E '^FAIL|error' "$OUT/seqpar-$m-cuda.log" | head -3 | tr '\n' ';')"
  fi
done

loss0() { python3 -c "import json,sys; print(json.load(open('$FIX/reference.json'))['models']['$1']['loss0_fp64'])"; }

for m in llama qwen2 gpt2; do
  for v in static dynamic dynamic-noopt; do
    log="$OUT/grads-$m-$v.log"
    "$LOOM" train "$FIX/$m.$v.onnx" --backend cuda --data "$FIX/corpus.u16.bin" --batch 4 --seq 64 \
      --steps 1 --batching fixture --init-weights "$FIX/$m.init.safetensors" \
      --expect-loss "$(loss0 $m)" --expect-grads "$FIX/$m.grads0.npz" > "$log" 2>&1
    st=$?
    detail=$(grep -E 'step-0 (loss|gradients)' "$log" | sed 's/  */ /g' | tr '\n' ';')
    [ $st -eq 0 ] && report "grads-$m-$v" PASS "$detail" || report "grads-$m-$v" FAIL "$detail $(tail -1 "$log")"
  done
  for run in fp32 bf16 bf16-loomattn; do
    prec=${run%%-*} jl="$OUT/curve-$m-$run.jsonl"
    rm -f "$jl"
    bound=2e-3 extra=(--grad-norm-rel 0.01)
    # bf16: steps where PyTorch's own fp32 and bf16 runs disagree by more
    # than the bound are chaotic and not bounded (check_curve.py).
    [ $prec = bf16 ] && bound=2e-2 extra=(--skip-unstable 2e-2)
    cudnn=1 join=1
    # The A/B runs below compare bits against this one: the unfolded casts
    # keep the sibling GEMMs apart, so it keeps them apart too (the joined
    # step is the cuDNN curve's).
    [ $run = bf16-loomattn ] && cudnn=0 join=0
    if env LOOM_CUDNN=$cudnn LOOM_JOIN_SIBLING_GRADS=$join "$LOOM" train "$FIX/$m.dynamic.onnx" --backend cuda --data "$FIX/corpus.u16.bin" --batch 4 \
        --seq 64 --steps 50 --batching fixture --warmup 5 --precision $prec \
        --init-weights "$FIX/$m.init.safetensors" --log "$jl" > "$OUT/curve-$m-$run.log" 2>&1; then
      res=$(python3 test/integration/Inputs/check_curve.py "$jl" "$FIX/reference.json" $m $prec \
            --max-loss-diff $bound "${extra[@]}")
      st=$?
      [ $st -eq 0 ] && report "curve-$m-$run" PASS "$res" || report "curve-$m-$run" FAIL "$res"
    else
      report "curve-$m-$run" FAIL "$(tail -1 "$OUT/curve-$m-$run.log")"
    fi
  done
  # Neither folding the casts, nor fusing the gradient clipping, nor
  # launching the small AdamWs together (AdamWGroups.h) may change a bit of
  # the bf16 run: each switched off, against the LOOM_CUDNN=0 run.
  for ab in fold:LOOM_FOLD_CASTS gradclip:LOOM_FUSE_GRAD_CLIP groupadamw:LOOM_GROUP_ADAMW; do
    name=${ab%%:*} var=${ab#*:}
    jl="$OUT/curve-$m-bf16-no-$name.jsonl"
    rm -f "$jl"
    res=
    if env "$var=0" LOOM_CUDNN=0 LOOM_JOIN_SIBLING_GRADS=0 "$LOOM" train "$FIX/$m.dynamic.onnx" --backend cuda --data "$FIX/corpus.u16.bin" \
        --batch 4 --seq 64 --steps 50 --batching fixture --warmup 5 --precision bf16 \
        --init-weights "$FIX/$m.init.safetensors" --log "$jl" > "$OUT/curve-$m-bf16-no-$name.log" 2>&1 &&
       res=$(python3 -c "
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]; b = [json.loads(l) for l in open(sys.argv[2])]
same = len(a) == len(b) == 50 and all(x['loss'] == y['loss'] and x['grad_norm'] == y['grad_norm'] for x, y in zip(a, b))
print('50 steps, same loss and grad norm bits' if same else 'differs'); sys.exit(0 if same else 1)" \
         "$jl" "$OUT/curve-$m-bf16-loomattn.jsonl"); then
      report "$name-$m-bf16" PASS "$res ($var=0)"
    else
      report "$name-$m-bf16" FAIL "${res:-$(tail -1 "$OUT/curve-$m-bf16-no-$name.log")}"
    fi
  done
done
# Activation checkpointing changes no bits on the GPU either: every policy
# against --ac none, on loom's own (bitwise reproducible) attention.
ac_check() { # name model precision plan
  local res
  if res=$(env LOOM_CUDNN=0 python3 test/integration/Inputs/check_recompute.py "$LOOM" "$FIX/$2.dynamic.onnx" \
             "$FIX/corpus.u16.bin" "$OUT/ac" --backend cuda --precision "$3" --plan "$4" 2>&1); then
    report "$1" PASS "$(echo "$res" | sed 's/ (.*): 20 steps, losses and weights bit-identical to --ac none;/:/' | tr '\n' ';')"
  else
    report "$1" FAIL "$(echo "$res" | grep -v '^PASS' | head -3 | tr '\n' ';')"
  fi
}
for m in llama qwen2 gpt2; do
  for prec in fp32 bf16; do ac_check "ac-$m-$prec" $m $prec 1; done
done
for plan in dp_shard=2 tp=2; do ac_check "ac-llama-$plan" llama bf16 $plan; done

# The whole run no longer fits one 10-minute device call (the core rows
# took ~6 minutes on an H100, then the pipeline and zoo rows): LOOM_GPU_TEST_PP=none
# and LOOM_GPU_TEST_ZOO=none leave those to calls of their own
# (bash scripts/gpu-test-pp.sh BUILD, bash scripts/gpu-test-zoo.sh BUILD).
[ "${LOOM_GPU_TEST_PP:-}" = none ] || source scripts/gpu-test-pp.sh
source scripts/gpu-test-zoo.sh
echo "gpu-test: logs in $OUT"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
