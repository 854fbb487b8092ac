"""The group workload's read rate beside the plain consumers' (issue 43's target: at least 70%).

    .venv/bin/python benchmarks/group_poll_rate.py [--seconds 20] [--rounds 3] [--library confluent]
        [--consumers 3]

Each round runs `highwater run` twice on a local 3-broker cluster with no faults, the same seed, the same
producers and the same Kafka client library, alternating which goes first:

  plain   --workload producer-consumer --consumers N   (assign, poll, the history's plain polls)
  group   --workload group --members N --churn 0       (subscribe, poll, commit; no member leaves)

and reads each run's history: polls that returned records per second, records read per second (each
record once per read), and the records read as a share of the acknowledged sends. Prints each run and
the median of the group/plain ratios per round. Every run's cluster is torn down by `highwater run`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HIGHWATER = [str(REPO / ".venv" / "bin" / "highwater")]


def run_once(kind: str, seconds: float, consumers: int, library: str, seed: int, results: Path) -> dict:
    workload = (["--workload", "producer-consumer", "--consumers", str(consumers)] if kind == "plain" else
                ["--workload", "group", "--members", str(consumers), "--churn", "0"])
    cmd = HIGHWATER + ["run", *workload, "--client", "kafka", "--kafka-library", library, "--nemesis", "none",
                       "--time-limit", str(seconds), "--seed", str(seed), "--checker", "reference", "--plain",
                       "--results-dir", str(results), "--test-name", kind]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    run_dir = next((Path(line.strip()).parent for line in done.stdout.splitlines()
                    if line.strip().endswith("report.html")), None)
    if run_dir is None:
        sys.exit(f"group_poll_rate: {kind} run printed no report path (exit {done.returncode}): "
                 f"{done.stderr.strip().splitlines()[-1:]}")
    polls = records = sends = 0
    first = last = None
    with (run_dir / "history.jsonl").open() as fh:
        for line in fh:
            op = json.loads(line)
            if op["type"] != "ok":
                continue
            if op["f"] == "send":
                sends += 1
            elif op["f"] == "poll" and op["value"].get("records"):
                polls += 1
                records += len(op["value"]["records"])
                first = op["time"] if first is None else first
                last = op["time"]
    span = max((last - first) / 1e9, 1e-9) if first is not None else float("nan")
    return {"kind": kind, "exit": done.returncode, "polls_s": polls / span, "records_s": records / span,
            "read_share": records / sends if sends else float("nan"), "sends": sends, "run": str(run_dir)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--library", default="confluent", choices=("confluent", "kafka-python"))
    ap.add_argument("--consumers", type=int, default=3)
    args = ap.parse_args()
    ratios: dict[str, list[float]] = {"polls_s": [], "records_s": []}
    with tempfile.TemporaryDirectory(prefix="group-poll-rate-") as tmp:
        for r in range(args.rounds):
            order = ("plain", "group") if r % 2 == 0 else ("group", "plain")
            got = {}
            for kind in order:
                got[kind] = m = run_once(kind, args.seconds, args.consumers, args.library, 100 + r, Path(tmp))
                print(f"round {r + 1} {kind:5s}: exit {m['exit']}, {m['polls_s']:8.1f} polls/s with records, "
                      f"{m['records_s']:9.1f} records/s, read {m['read_share']:.2f}x the {m['sends']} acknowledged "
                      f"sends", flush=True)
            for key in ratios:
                ratios[key].append(got["group"][key] / got["plain"][key])
    for key, values in ratios.items():
        print(f"group/plain {key}: median {statistics.median(values):.2f} "
              f"(range {min(values):.2f}-{max(values):.2f}, {len(values)} rounds)")


if __name__ == "__main__":
    main()
