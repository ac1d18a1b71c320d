#!/bin/bash
# call 5 (thirteenth session): gpu-test's bit-for-bit rows with the head's semantics: each
# fixture's bf16 curve on loom's attention with the sibling GEMMs apart (LOOM_JOIN_SIBLING_GRADS=0)
# against LOOM_FOLD_CASTS=0, LOOM_FUSE_GRAD_CLIP=0 and LOOM_GROUP_ADAMW=0; then activation
# checkpointing against --ac none on CUDA, bf16, with the join on (llama, qwen2).
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R/ac; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call5: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; }
run() { # tag model env...
  local tag=$1 m=$2; shift 2
  env "$@" LOOM_CUDNN=0 $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 \
    --steps 50 --batching fixture --warmup 5 --precision bf16 --init-weights $FIX/$m.init.safetensors \
    --log $R/$m-$tag.jsonl > $R/$m-$tag.txt 2>&1
}
same() { python3 -c "
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]; b = [json.loads(l) for l in open(sys.argv[2])]
same = len(a) == len(b) == 50 and all(x['loss'] == y['loss'] and x['grad_norm'] == y['grad_norm'] for x, y in zip(a, b))
print('same loss and grad norm bits' if same else 'DIFFER')" "$1" "$2"; }
for m in llama qwen2 gpt2; do
  run ref $m LOOM_JOIN_SIBLING_GRADS=0
  for var in LOOM_FOLD_CASTS LOOM_FUSE_GRAD_CLIP LOOM_GROUP_ADAMW; do
    run $var $m LOOM_JOIN_SIBLING_GRADS=0 $var=0
    echo "$m $var=0: $(same $R/$m-ref.jsonl $R/$m-$var.jsonl)"
  done
done
stamp ab; pack
for m in llama qwen2; do
  LOOM_CUDNN=0 timeout 100 python3 test/integration/Inputs/check_recompute.py $LOOM $FIX/$m.dynamic.onnx \
    $FIX/corpus.u16.bin $R/ac --backend cuda --precision bf16 --plan 1 > $R/ac-$m.txt 2>&1
  echo "ac-$m-bf16: exit $? $(cut -c1-110 $R/ac-$m.txt | tr '\n' ';')"
done
stamp ac; pack
