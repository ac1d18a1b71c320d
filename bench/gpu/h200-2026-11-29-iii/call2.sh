#!/bin/bash
# call 2 (thirteenth session): small AdamWs in one launch per group (ad5efcb): the CUDA kernel
# tests (CudaBackend.SmallAdamWsInOneLaunchKeepTheirBits among them); each fixture's bf16 50-step
# curve with LOOM_GROUP_ADAMW=0 against the default (loom's attention: bit for bit); per-opcode
# profiles of gpt2-large and qwen2.5-1.5b with the grouping off and on, and llama-1b on.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; W=/tmp/loom-suite; rm -rf $R; mkdir -p $R $W; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call2: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { cp $W/*.txt $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; }
for s in gpt2-large qwen2.5-1.5b llama-1b; do
  mkdir -p $W/$s; (timeout 300 python3 bench/gpu/export_model.py $s $W/$s > $W/export-$s.txt 2>&1) &
done
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*:AdamWGroups.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]|SmallAdamW" $R/unit.txt | head -20
stamp unit; pack
for m in llama qwen2 gpt2; do
  for g in 1 0; do
    LOOM_GROUP_ADAMW=$g LOOM_CUDNN=0 $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 50 \
      --batching fixture --warmup 5 --precision bf16 --init-weights $FIX/$m.init.safetensors \
      --log $R/curve-$m-group$g.jsonl > $R/curve-$m-group$g.txt 2>&1
  done
  echo "groupadamw-$m: $(python3 -c "
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]; b = [json.loads(l) for l in open(sys.argv[2])]
same = len(a) == len(b) == 50 and all(x['loss'] == y['loss'] and x['grad_norm'] == y['grad_norm'] for x, y in zip(a, b))
print('50 steps, same loss and grad norm bits' if same else 'differs')" $R/curve-$m-group1.jsonl $R/curve-$m-group0.jsonl)"
done
stamp bits; pack
wait; stamp exports
prof() { # model batch seq tag [env...]
  local m=$1 b=$2 t=$3 tag=$4; shift 4
  env "$@" LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 timeout 120 $LOOM train $W/$m/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch $b --seq $t --steps 6 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/profile-$m-$tag.txt 2>&1
  echo "$m $tag: $(grep -E 'per run in kernels' $R/profile-$m-$tag.txt | cut -c1-90)"
  grep -E '^  (adamw|small adamw|adamw:) ' $R/profile-$m-$tag.txt | sed "s/^/    /"
}
prof gpt2-large 8 1024 apart LOOM_GROUP_ADAMW=0
prof gpt2-large 8 1024 grouped
prof qwen2.5-1.5b 4 2048 apart LOOM_GROUP_ADAMW=0
prof qwen2.5-1.5b 4 2048 grouped; pack
prof llama-1b 4 2048 grouped
# graph replays (no per-kernel events): the step as training runs it, grouping off and on, twice
for tag in apart grouped apart grouped; do
  g=1; [ $tag = apart ] && g=0
  LOOM_GROUP_ADAMW=$g LOOM_CUDA_GRAPH_TIMING=1 LOOM_CUDA_PROFILE_FROM=3 timeout 120 $LOOM train $W/gpt2-large/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch 8 --seq 1024 --steps 12 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/graph-gpt2-large-$tag.txt 2>&1
  echo "gpt2-large graph $tag: $(grep -E 'graph timing' $R/graph-gpt2-large-$tag.txt | cut -c1-140)"
done
stamp profiles; pack
