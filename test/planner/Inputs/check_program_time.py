"""Checks loom plan --json's program-priced rows: on a plan that is one
device's step (tp = cp = pp = dp_shard = 1, one microbatch) the compute
time is the compiled program's, and it is the sum of its opcode classes;
every other plan keeps the per-op model."""
import json
import sys

rows = json.load(open(sys.argv[1]))["plans"]
for r in rows:
    t = r["time"]
    one_device = r["tp"] == 1 and r["cp"] == 1 and r["pp"] == 1 and r["dp_shard"] == 1 and r["microbatches"] == 1
    if not one_device:
        assert t["compute_source"] == "model", r["id"]
        continue
    assert t["compute_source"] == "program", r["id"]
    classes = t["compute_by_class"]
    total = sum(c["seconds"] for c in classes.values())
    assert abs(total - t["compute"]) <= 1e-9 * max(1.0, t["compute"]), (r["id"], total, t["compute"])
    opt = sum(classes[c]["seconds"] for c in ("adamw", "sum_squares", "global_sum_squares") if c in classes)
    assert abs(opt - t["optimizer"]) <= 1e-12 + 1e-9 * opt, r["id"]
    adamw = classes["adamw"]
    print(f'{r["id"]}: program {t["compute"] * 1e3:.3f} ms in {len(classes)} classes; adamw {adamw["instrs"]} instrs, {adamw["rate"]}')
print("ok")
