#!/usr/bin/env python3
# Compares a `loom train --fp8 ...` log with the bf16 loss curves: PyTorch's
# (the fixtures' reference.json) and loom's own bf16 run of the same steps.
#
#   check_fp8_curve.py FP8.jsonl BF16.jsonl reference.json MODEL --max-rel R --after S
#
# Every step after S must be within R (relative) of both bf16 curves. The
# fp8 run must also differ from loom's bf16 run at some step, so that a
# pipeline that quietly left fp8 out cannot pass. Prints the worst relative
# difference against each curve and exits 1 when a bound is broken.
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("fp8")
p.add_argument("bf16")
p.add_argument("reference")
p.add_argument("model")
p.add_argument("--max-rel", type=float, required=True)
p.add_argument("--after", type=int, required=True)
a = p.parse_args()


def losses(path):
    try:
        rows = [json.loads(line) for line in open(path) if line.strip()]
    except OSError as e:
        print(f"FAIL: cannot read {path}: {e.strerror}")
        sys.exit(1)
    return {r["step"]: r["loss"] for r in rows}


torch = json.load(open(a.reference))["models"][a.model]["curve_bf16"]["loss"]
fp8, bf16 = losses(a.fp8), losses(a.bf16)
n = len(torch)
missing = [s for s in range(n) if s not in fp8 or s not in bf16]
if missing:
    print(f"FAIL: step {missing[0]} is missing from a run (the reference has {n} steps)")
    sys.exit(1)
steps = [s for s in range(n) if s > a.after]
rel_torch = {s: abs(fp8[s] - torch[s]) / abs(torch[s]) for s in steps}
rel_loom = {s: abs(fp8[s] - bf16[s]) / abs(bf16[s]) for s in steps}
wt = max(steps, key=lambda s: rel_torch[s])
wl = max(steps, key=lambda s: rel_loom[s])
differs = any(fp8[s] != bf16[s] for s in range(n))
ok = rel_torch[wt] <= a.max_rel and rel_loom[wl] <= a.max_rel and differs
print(("PASS: " if ok else "FAIL: ") +
      f"{a.model} fp8 vs bf16 after step {a.after}: PyTorch's curve max rel diff {rel_torch[wt]:.2e} "
      f"(step {wt}), loom's max {rel_loom[wl]:.2e} (step {wl}), mean {sum(rel_loom.values()) / len(steps):.2e} "
      f"(bound {a.max_rel:.0e}); " + ("differs from bf16" if differs else "identical to bf16: fp8 is not on"))
sys.exit(0 if ok else 1)
