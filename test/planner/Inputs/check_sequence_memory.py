"""Issue 18, check 2: per-rank activation memory from the compiler's buffer
plan (loom plan --explain ... --json, memory_source buffer-plan) and the
largest tensor a rank holds (--dump-rank-buffers).

usage: check_sequence_memory.py B T V CP1.json CP4.json TP2SP.json TP2.json \
           TP2SP.buffers.json TP2.buffers.json
"""
import json
import math
import sys


def activations(path):
    explain = json.load(open(path))["explain"]
    assert explain["memory_source"] == "buffer-plan", (path, explain["memory_source"])
    return explain["memory"]["activations"]


def largest(path):
    return max(math.prod(b["shape"]) for b in json.load(open(path)))


B, T, V = (int(x) for x in sys.argv[1:4])
cp1, cp4, sp, nosp = (activations(p) for p in sys.argv[4:8])
gib = 2.0 ** 30
ok = True

ratio = cp4 / cp1
print("cp=4 activations %.3f GiB vs cp=1 %.3f GiB: %.3f (bound 0.3): %s"
      % (cp4 / gib, cp1 / gib, ratio, "PASS" if ratio <= 0.3 else "FAIL"))
ok &= ratio <= 0.3

# Megatron's accounting (Korthikanti et al. 2022, no attention scores):
# tp alone keeps sbh (10 + 24/t) per layer, tp with sequence parallelism
# sbh 34/t: 17/22 = 0.773 at t = 2. Sequence parallelism splits what lies
# outside the tensor-parallel regions (norms, residual stream); the
# regions' own activations are already split by tp alone.
ratio = sp / nosp
print("tp=2 with sp activations %.3f GiB vs without %.3f GiB: %.3f (Megatron's 34/t over "
      "10 + 24/t: %.3f; bound 0.78): %s"
      % (sp / gib, nosp / gib, ratio, 17 / 22, "PASS" if ratio <= 0.78 else "FAIL"))
ok &= ratio <= 0.78

whole = B * T * V
for label, path in (("loss parallel", sys.argv[8]), ("no loss parallel", sys.argv[9])):
    n = largest(path)
    print("%s: largest tensor on a rank %d elements, [B, T, V] = %d: %s"
          % (label, n, whole, "holds [B, T, V]" if n >= whole else "no [B, T, V]"))
sys.exit(0 if ok else 1)
