"""Admission rates of the round-trip faithfulness filter per level on bnlearn backdoor problems.

    PYTHONPATH=. python3 benchmarks/text_levels_bench.py [--per-net 10] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import time

from calver.data_gen.bnlearn import bnlearn_problems
from calver.data_gen.text_levels import admission_report

NETS = ("asia", "sachs", "child", "insurance", "alarm", "hailfinder", "hepar2", "win95pts", "andes", "survey")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-net", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    t = time.time()
    problems = [p for net in NETS for p in bnlearn_problems(net, "backdoor_set", args.per_net, 0)]
    per_net = {}
    for p in problems:
        per_net[p.meta["network"]] = per_net.get(p.meta["network"], 0) + 1
    totals: dict[int, list[int]] = {}
    for seed in range(args.seeds):
        for lv, st in admission_report(problems, seed=seed).items():
            a = totals.setdefault(lv, [0, 0])
            a[0] += st["admitted"]
            a[1] += st["total"]
    print(json.dumps({"problems_per_network": per_net,
                      "admission": {f"L{lv}": {"admitted": a, "total": n, "rate": round(a / n, 3)}
                                    for lv, (a, n) in totals.items()},
                      "seconds": round(time.time() - t, 1)}, indent=2))


if __name__ == "__main__":
    main()
