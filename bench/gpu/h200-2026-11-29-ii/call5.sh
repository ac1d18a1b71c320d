#!/bin/bash
# call 5 (twelfth session): the cross-entropy kernel's change (aligned packs whatever V % 8,
# evict-first stores) in the CUDA kernel tests and the fixtures' gradients and curves; per-opcode
# profiles of gpt2-large, qwen2.5-1.5b and llama-1b; llama-1b again with LOOM_CUDNN_ENGINE=1, 2
# (cuDNN's other finalizable attention engine configs, when its heuristics rank more than one).
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call5: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
for s in llama-1b qwen2.5-1.5b gpt2-large; do
  mkdir -p /tmp/s/$s; (timeout 300 python3 bench/gpu/export_model.py $s /tmp/s/$s > $R/export-$s.txt 2>&1) &
done
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20
stamp unit
for m in llama qwen2 gpt2; do
  $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights $FIX/$m.init.safetensors --expect-grads $FIX/$m.grads0.npz > $R/grads-$m.txt 2>&1
  echo "grads-$m: exit $? $(grep -E 'step-0 gradients' $R/grads-$m.txt)"
  for prec in fp32 bf16; do
    bound=2e-3 extra=(--grad-norm-rel 0.01); [ $prec = bf16 ] && bound=2e-2 extra=(--skip-unstable 2e-2)
    $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 50 \
      --batching fixture --warmup 5 --precision $prec --init-weights $FIX/$m.init.safetensors \
      --log $R/curve-$m-$prec.jsonl > $R/curve-$m-$prec.txt 2>&1
    echo "curve-$m-$prec: $(python3 test/integration/Inputs/check_curve.py $R/curve-$m-$prec.jsonl $FIX/reference.json $m $prec --max-loss-diff $bound "${extra[@]}")"
  done
done
stamp parity; pack
wait; stamp exports
prof() { # model batch seq tag [env...]
  local m=$1 b=$2 t=$3 tag=$4; shift 4
  env "$@" LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 timeout 120 $LOOM train /tmp/s/$m/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch $b --seq $t --steps 6 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/profile-$m-$tag.txt 2>&1
  echo "$m $tag: $(grep -E 'per run in kernels' $R/profile-$m-$tag.txt | cut -c1-90)"
  grep -E '^  (attention|attention_grad|cross_entropy_grad) |loom cudnn' $R/profile-$m-$tag.txt | sed "s/^/    /"
}
prof gpt2-large 8 1024 new; pack
prof qwen2.5-1.5b 4 2048 new; pack
prof llama-1b 4 2048 new
for k in 1 2 0; do prof llama-1b 4 2048 engine$k LOOM_CUDNN_ENGINE=$k; done
stamp done; pack
