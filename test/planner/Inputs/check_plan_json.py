# Checks a `loom plan --json` report: parses, sums, ordering.
import json
import sys

report = json.load(open(sys.argv[1]))
plans, rejected = report["plans"], report["rejected"]
print("plans", len(plans), "rejected", len(rejected), "feasible", report["feasible"], "of", report["candidates"])
for p in plans + rejected:
    for key in ("memory", "memory_analytical"):
        if key in p:
            m = p[key]
            parts = m["params"] + m["grads"] + m["optimizer"] + m["activations"] + m["comm"] + m["workspace"]
            assert abs(parts - m["total"]) <= 1e-6 * m["total"], (p["id"], key, parts, m["total"])
    t = p["time"]
    assert abs(t["compute"] + t["comm"] + t["bubble"] - t["total"]) <= 1e-9 * t["total"], p["id"]
    assert t["optimizer"] <= t["compute"], p["id"]
    tokens = p["sequences_per_step"] * report["request"]["seq"]
    assert abs(tokens / t["total"] - p["tokens_per_s"]) <= 1e-6 * p["tokens_per_s"], p["id"]
print("breakdowns add up")
speeds = [p["tokens_per_s"] for p in plans]
assert speeds == sorted(speeds, reverse=True)
assert [p["rank"] for p in plans] == list(range(1, len(plans) + 1))
assert all(p["reasons"] for p in rejected)
print("ranked by tokens/s")
print("buffer-plan plans:", sum(p["memory_source"] == "buffer-plan" for p in plans))
