"""What the white-box rules add: one table from one or more benchmarks/mutation.py --json files.

    .venv/bin/python benchmarks/mutation_report.py RESULTS.json [MORE.json ...]

Per mutant, and in total: caught by (a) the default run and (b) the safe explore, and, from the same runs, what would have
caught it without this project's white-box checks: (a) counting only the history and replica-dump kinds
(every kind but the protocol rules of broker/rules and realtime-order), (b) counting only the
simulator's state invariants (committed-prefix-agreement, no-acked-loss) and the three rules that
replaced its old per-event invariants (hw-above-leo for hw-within-leo, leader-hw-decrease for
leader-hw-monotonic, epoch-two-leaders for one-leader-per-epoch). The explorer stops a schedule at its
first violation, so a newer rule met first can hide an older invariant met later in the same schedule:
the "without" column of (b) is a lower bound. Several files (runs at one or more commits, or a rerun of
the escaped mutants at a later commit) are merged: a mutant counts as caught by a method when any run
caught it, so each file's own totals are printed first, one run per mutant each.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.rules import names as rule_names  # noqa: E402
from rundir import kinds  # noqa: E402
from benchmarks.mutation import load_corpus  # noqa: E402

NEW_KINDS = set(kinds.PROTOCOL_NAMES) | {kinds.REALTIME_ORDER.name}
OLD_EXPLORE = {"committed-prefix-agreement", "no-acked-loss", rule_names.HW_ABOVE_LEO, rule_names.LEADER_HW_DECREASE,
               rule_names.EPOCH_TWO_LEADERS}


def _row(rec: dict) -> dict:
    a = rec["methods"].get("a") or {}
    b = rec["methods"].get("b") or {}
    a_kinds, b_kinds = set(a.get("kinds") or []), set(b.get("kinds") or [])
    return {"name": rec["name"], "area": rec["area"], "rule": rec["rule"],
            "a": bool(a.get("caught")), "a_old": bool(a.get("caught")) and bool(a_kinds - NEW_KINDS),
            "b": bool(b.get("caught")), "b_old": bool(b.get("caught")) and bool(b_kinds & OLD_EXPLORE),
            "a_kinds": sorted(a_kinds), "b_kinds": sorted(b_kinds)}


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    merged: dict[str, dict] = {}
    commits = []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        commits.append(doc.get("commit", "?")[:7])
        own = {}
        for rec in doc.get("records", []):
            row = _row(rec)
            own[row["name"]] = row
            if row["name"] in merged:
                old = merged[row["name"]]
                for k in ("a", "a_old", "b", "b_old"):
                    old[k] = old[k] or row[k]
                old["a_kinds"] = sorted(set(old["a_kinds"]) | set(row["a_kinds"]))
                old["b_kinds"] = sorted(set(old["b_kinds"]) | set(row["b_kinds"]))
            else:
                merged[row["name"]] = dict(row)
        n = len(own)
        print(f"{p} (commit {commits[-1]}): {n} mutants, one run each: a {sum(r['a'] for r in own.values())}/{n} "
              f"(without the white-box checks {sum(r['a_old'] for r in own.values())}/{n}), "
              f"b {sum(r['b'] for r in own.values())}/{n} (without: at least "
              f"{sum(r['b_old'] for r in own.values())}/{n}), a or b "
              f"{sum(r['a'] or r['b'] for r in own.values())}/{n}")
    # equivalent mutants (the corpus says why no run can observe them, today) are listed, not counted
    equivalent = {m.name: m.equivalent for m in load_corpus() if m.equivalent}
    rows = sorted((r for r in merged.values() if r["name"] not in equivalent), key=lambda r: (r["area"], r["name"]))
    print(f"merged (commits {', '.join(commits)}): {len(rows)} mutants")
    print(f"{'mutant':34s} {'area':16s} {'a':4s} {'a w/o':6s} {'b':4s} {'b w/o':6s} kinds")
    for r in rows:
        mark = lambda x: "yes" if x else "-"  # noqa: E731
        found = "; ".join(s for s in (f"a: {','.join(r['a_kinds'])}" if r["a_kinds"] else "",
                                      f"b: {','.join(r['b_kinds'])}" if r["b_kinds"] else "") if s)
        print(f"{r['name']:34s} {r['area']:16s} {mark(r['a']):4s} {mark(r['a_old']):6s} {mark(r['b']):4s} "
              f"{mark(r['b_old']):6s} {found}")
    n = len(rows)

    def count(*keys):
        return sum(1 for r in rows if any(r[k] for k in keys))
    print(f"caught by a: {count('a')}/{n} (without the white-box checks: {count('a_old')}/{n})")
    print(f"caught by b: {count('b')}/{n} (without: at least {count('b_old')}/{n})")
    print(f"caught by a or b: {count('a', 'b')}/{n} (without: at least {count('a_old', 'b_old')}/{n})")
    areas = sorted({r["area"] for r in rows})
    print("per area (a or b): " + ", ".join(
        f"{ar} {sum(1 for r in rows if r['area'] == ar and (r['a'] or r['b']))}/"
        f"{sum(1 for r in rows if r['area'] == ar)}" for ar in areas))
    escaped = [r["name"] for r in rows if not (r["a"] or r["b"])]
    print(f"escaped ({len(escaped)}): {', '.join(escaped)}")
    for name in sorted(set(equivalent) & set(merged)):
        print(f"equivalent, not counted: {name}: {equivalent[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
