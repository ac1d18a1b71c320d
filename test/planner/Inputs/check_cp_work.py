"""Issue 18, check 3: the attention work of each cp rank, counted by the
planner from the partitioned IR (loom plan --explain ... --json,
explain.partitioned_ir.attention_per_cp_rank).

usage: check_cp_work.py PLAN.json LAYERS BATCH HEADS SEQ
Prints each rank's query-key pairs, whether the ranks are equal within 1%,
whether the ranks compute only visible pairs, and whether together they
cover the causal attention of the whole sequence once.
"""
import json
import sys

plan = json.load(open(sys.argv[1]))["explain"]["partitioned_ir"]
layers, batch, heads, seq = (int(x) for x in sys.argv[2:6])
ranks = plan["attention_per_cp_rank"]
for k, r in enumerate(ranks):
    print("cp rank %d: forward %d visible %d, backward %d visible %d"
          % (k, r["forward"], r["forward_visible"], r["backward"], r["backward_visible"]))
work = [r["forward"] + r["backward"] for r in ranks]
balance = max(work) / min(work)
print("balance %.4f: %s" % (balance, "PASS" if balance <= 1.01 else "FAIL"))
wasted = sum(r["forward"] - r["forward_visible"] + r["backward"] - r["backward_visible"] for r in ranks)
print("masked pairs computed: %d" % wasted)
causal = layers * batch * heads * seq * (seq + 1) // 2
covered = sum(r["forward_visible"] for r in ranks)
print("forward pairs of all ranks %d, one device's causal attention %d: %s"
      % (covered, causal, "same" if covered == causal else "DIFFERENT"))
sys.exit(0 if balance <= 1.01 and covered == causal and wasted == 0 else 1)
