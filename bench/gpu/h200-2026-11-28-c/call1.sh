#!/bin/bash
# call 1 (2026-11-28, fifth session): the bundle at the gradient sums fused into their GEMMs
# (loom-fuse-matmul-accumulate), the GEMM tuning's arena form and the two recompute changes of
# the session before, none of them run on a GPU yet. In order: the CUDA kernel tests (the
# addend GEMMs among them), the three fixtures' fp32 and bf16 curves against PyTorch's and their
# step-0 gradients, recompute's bit-identity on CUDA, the zoo's fp32 and bf16 curves; then the
# fp8 timing at the Llama-3-8B layer shape (issue 17 check 3) and, with the time left, loom alone
# on llama-1b with and without the fusion.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call1: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
# Exports on the CPU while the GPU runs the checks.
LOOM_BENCH_DIR=/tmp/fp8 timeout 300 bash bench/gpu/fp8.sh $B .carry/ref/torch_fp8_bench.py export > $R/fp8-export.txt 2>&1 &
mkdir -p /tmp/s/llama-1b; timeout 300 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export-llama-1b.txt 2>&1 &
F='CudaBackend.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
timeout 100 $B/unittests/loom-unittests --gtest_filter='DeviceMemoryCommunicator.*:PointToPoint.DeviceMemory*:PipelineCuda.*' > $R/device-ranks.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt $R/device-ranks.txt | head -20; stamp unit
for m in llama qwen2 gpt2; do
  $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights $FIX/$m.init.safetensors --expect-grads $FIX/$m.grads0.npz > $R/grads-$m.txt 2>&1
  echo "grads-$m: exit $? $(grep -E 'step-0 gradients' $R/grads-$m.txt)"
  for prec in fp32 bf16; do
    bound=2e-3 extra=(--grad-norm-rel 0.01); [ $prec = bf16 ] && bound=2e-2 extra=(--skip-unstable 2e-2)
    $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 50 \
      --batching fixture --warmup 5 --precision $prec --init-weights $FIX/$m.init.safetensors \
      --log $R/curve-$m-$prec.jsonl --print-program-stats > $R/curve-$m-$prec.txt 2>&1
    echo "curve-$m-$prec: $(python3 test/integration/Inputs/check_curve.py $R/curve-$m-$prec.jsonl $FIX/reference.json $m $prec --max-loss-diff $bound "${extra[@]}")"
  done
done
for mp in llama:bf16 qwen2:fp32 gpt2:bf16; do
  echo "ac-${mp%%:*}-${mp#*:}: $(LOOM_CUDNN=0 timeout 90 python3 test/integration/Inputs/check_recompute.py $LOOM $FIX/${mp%%:*}.dynamic.onnx $FIX/corpus.u16.bin /tmp/ac --backend cuda --precision ${mp#*:} --plan 1 2>&1 | tr '\n' ';')"
done
stamp parity
LOOM_GPU_TEST_OUT=$R/zoo LOOM_GPU_TEST_ZOO_ROWS="bf16 fp32" timeout 120 bash scripts/gpu-test-zoo.sh $B > $R/zoo.txt 2>&1
tail -2 $R/zoo.txt; stamp zoo
wait %1
LOOM_BENCH_DIR=/tmp/fp8 LOOM_FP8_SKIP_CHECKS=1 STEPS=8 timeout $(( 530 - ($(date +%s) - T0) )) \
  bash bench/gpu/fp8.sh $B .carry/ref/torch_fp8_bench.py perf > $R/fp8-perf.txt 2>&1
tail -4 $R/fp8-perf.txt; stamp fp8
wait
for acc in 0 1; do
  [ $(( $(date +%s) - T0 )) -lt 540 ] || break
  LOOM_FUSE_MATMUL_ACCUMULATE=$acc timeout $(( 580 - ($(date +%s) - T0) )) $LOOM train /tmp/s/llama-1b/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 6 --precision bf16 --lr 1e-4 \
    --warmup 0 --print-every 1 > $R/llama-1b-acc$acc.txt 2>&1
  echo "llama-1b accumulate=$acc: $(grep -E '^step [2-5] ' $R/llama-1b-acc$acc.txt | awk '{print $NF}' | tr '\n' ' ')"
done
stamp done
