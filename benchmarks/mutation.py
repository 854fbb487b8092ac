"""Mutation benchmark: which small, plausible broker bugs does highwater catch?

    .venv/bin/python benchmarks/mutation.py [--only NAME,...] [--methods a,b] [--nightly]
        [--time-limit 60] [--budget 30] [--checker reference|spark] [--seed N]
        [--results-dir DIR] [--json FILE] [--list] [--check-apply] [--baseline] [--keep-copies]
    .venv/bin/python benchmarks/mutation.py --reach DIR [DIR ...]

The corpus is benchmarks/mutants/*.toml (README.md there): each mutant is a 1-5 line bug written from a
protocol promise (its `rule`), one exact `find` snippet (found exactly once in `file`) and its `replace`.
For each mutant, one at a time: the commit at HEAD when the benchmark starts is copied (`git archive`)
into a temporary tree, the mutant is applied there, and highwater runs from that copy:

  a  `highwater run --time-limit 60`: the default nemesis and safe settings; caught = exit 1 (INVALID);
     exit 2 (UNKNOWN) is counted apart, not as caught;
  b  `highwater explore --budget 30 --truncation leader-epoch --acks all --min-insync-replicas 2`
     (the simulated broker: only mutants of broker/replication and broker/controller can show);
     caught = exit 1;
  c  `highwater suite suites/nightly.toml` (about an hour each); caught = a configuration whose
     expectation failed. Opt-in: `--methods ...,c` runs it for every mutant, `--nightly` only for the
     mutants that escaped the other methods.

Why a mutant escaped: a mutant may name its code path (`reached`, the event-log line that shows a run
took it, and `needs`, the settings it exists under; benchmarks/mutants/README.md). For an escape of method
a the benchmark says whether the run took that path at all, and the totals list the escapes whose run
never did. `--reach DIR ...` runs nothing: it counts, for every mutant with a marker, the run directories
under DIR that took its path (point it at the results of many default runs, e.g. benchmarks/false_alarms.py).

It prints a progress line per step, how long each step took, the anomaly kinds of the caught ones
(results.json `failed_kinds`, explore.json `findings_by_invariant`, the suite's failed configurations)
and the mutants that escaped; `--json` saves the figures (rewritten after every mutant). The working tree
is never modified: only the copies are, under the results directory (a fresh temp dir by default, so the
mutants' runs never land in the repo's results/).

How the mutated code is what runs (and `--check-apply` checks it):
  * every highwater command runs as `python -c "from harness.cli import main ..."` with cwd = the copy
    and PYTHONPATH = the copy first. The venv's editable install maps the packages to this checkout
    through a meta-path finder that Python consults only after the ordinary sys.path search, so the
    harness, the explorer (in-process) and every package they import come from the copy;
  * the local backend starts brokers and the controller with `python -m broker` and PYTHONPATH = the
    root of the `clusters` package it was imported from (clusters/local.py REPO_ROOT), i.e. the copy;
  * `--check-apply` imports each mutated module in a child with the very environment of the runs and
    requires its file to be inside the copy, starts a 3-broker cluster from the copy (the mutant must
    start and elect leaders), and first runs a canary: a real `highwater run` from a copy whose
    `python -m broker` prints its own path, which every node of the run (c0, n1..n3) must show inside
    the copy. Benchmarks running method a or c run the canary first too (`--skip-canary` skips it).
With the Spark checker the runs use a private Spark service directory under the results directory
(stopped at the end), so no shared service is left running from a temporary copy.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "benchmarks" / "mutants"
AREAS = ("replication", "controller", "storage", "server", "kafka-handlers", "native-handlers")
RULES = {
    "hw-le-leo": "a replica's HW never exceeds its LEO",
    "leader-hw-monotonic": "a leader's HW never goes back within its epoch",
    "follower-hw-le-leader-hw": "a follower's HW never exceeds its leader's HW (HW = min(leader HW, own LEO))",
    "hw-isr-fetched": "the HW advances only to what every ISR member has fetched",
    "ack-all-after-hw": "an acks=all produce is acknowledged only once the HW has passed its last offset",
    "ack-all-min-isr": "an acks=all produce is acknowledged only while the ISR has >= min.insync.replicas members",
    "ack-1-after-append": "an acks=1 produce is acknowledged after the leader appended it (durably, with flush=always)",
    "indefinite-after-append": "a produce appended but not known committed is answered indefinite, never a definite failure",
    "fsync-before-ack": "with flush=always an acknowledged record was fsynced first (group commit) and survives a power loss",
    "flush-durable": "an admin FLUSH makes the pending tail durable",
    "atomic-checkpoints": "checkpoints (HW, leader epochs, controller state) are written atomically",
    "recovery-cut": "start-up recovery cuts the log at the first record failing its checks",
    "elect-from-isr": "the controller elects only from the ISR (or the ELR with KIP-966) unless unclean election is on",
    "epoch-bump": "each election increments the leader epoch",
    "one-leader-per-epoch": "one leader per epoch",
    "lead-given-epoch": "a broker leads only the epoch the controller gave it",
    "isr-join-caught-up": "a replica joins the ISR only when caught up to the HW and past the epoch start (KAFKA-7128)",
    "isr-shrink-lagging": "a lagging replica is removed from the ISR after replica_lag_time_max_ms",
    "truncate-epoch-end": "leader-epoch truncation cuts to the leader's end of the follower's epoch (KIP-101/279), never below its HW",
    "fencing": "KIP-320: a leader refuses follower requests from another leader epoch",
    "consumer-below-hw": "consumers read only below the HW",
    "fetch-answer-fields": "fetch answers carry the right HW, offsets and epochs",
    "kafka-offsets-errors": "the Kafka handlers return the right offsets and errors",
}
METHODS = {"a": "run", "b": "explore", "c": "nightly"}
SAFE_EXPLORE = ["--truncation", "leader-epoch", "--acks", "all", "--min-insync-replicas", "2"]
BOOT = "import sys; from harness.cli import main; sys.exit(main())"
VERDICTS = {0: "valid", 1: "invalid", 2: "unknown"}
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
REQUIRED = ("name", "file", "find", "replace", "area", "rule", "why")
# optional: `equivalent`, why no run of this broker can observe the mutant (the code it changes is never
# reached with inputs that tell the two apart); it still runs, and is reported outside the totals.
# `reached` (a table): the node event-log line that shows a run took the code path the mutant changes,
# `event` and exact field values (e.g. {event = "truncate", why = "offset-out-of-range"}); `needs` (a table):
# the run settings that path exists under, dotted keys of test.json `config` (e.g. {"broker.flush" =
# "never"}). They explain an escape: a run that never took the path could not have caught the mutant.
OPTIONAL = ("equivalent", "reached", "needs")


class MutantError(ValueError):
    """A corpus entry is malformed or does not apply to a tree."""


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    find: str
    replace: str
    area: str
    rule: str
    why: str
    equivalent: str = ""
    source: str = ""
    reached: tuple[tuple[str, Any], ...] = ()     # the path marker: (("event", name), (field, value), ...)
    needs: tuple[tuple[str, Any], ...] = ()       # (dotted config key, value) the path exists under

    @property
    def module(self) -> str:
        return ".".join(Path(self.file).with_suffix("").parts)


# Not part of the corpus: makes `python -m broker` print where it was loaded from (--check-apply, canary).
CANARY = Mutant(
    "canary", "broker/__main__.py",
    "    argv = list(sys.argv[1:] if argv is None else argv)\n",
    "    print(f\"MUTATION-CANARY {__file__}\", file=sys.stderr, flush=True)\n"
    "    argv = list(sys.argv[1:] if argv is None else argv)\n",
    "server", "lead-given-epoch", "canary: the broker process prints its own path")


# --- corpus -----------------------------------------------------------------------------------------------

def _mutant(entry: dict, source: Path) -> Mutant:
    missing = [k for k in REQUIRED if not isinstance(entry.get(k), str)]
    if missing:
        raise MutantError(f"{source}: {', '.join(missing)} missing or not a string")
    extra = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
    if extra:
        raise MutantError(f"{source}: unknown key(s) {', '.join(extra)}")
    if not isinstance(entry.get("equivalent", ""), str):
        raise MutantError(f"{source}: equivalent must be a string (why no run can observe the mutant)")
    reached, needs = entry.get("reached", {}), entry.get("needs", {})
    if not isinstance(reached, dict) or (reached and not isinstance(reached.get("event"), str)):
        raise MutantError(f"{source}: reached must be a table with an `event` name and the fields to match")
    if not isinstance(needs, dict) or any(not isinstance(k, str) or "." not in k for k in needs):
        raise MutantError(f"{source}: needs must be a table of dotted test.json config keys (\"broker.flush\" = ...)")
    for where, table in (("reached", reached), ("needs", needs)):
        bad = [k for k, v in table.items() if isinstance(v, (dict, list))]
        if bad:
            raise MutantError(f"{source}: {where}.{bad[0]} must be a single value")
    m = Mutant(**{k: entry[k] for k in REQUIRED}, equivalent=entry.get("equivalent", ""), source=str(source),
               reached=tuple(sorted(reached.items(), key=lambda kv: kv[0] != "event")),
               needs=tuple(sorted(needs.items())))
    if not NAME.match(m.name):
        raise MutantError(f"{source}: name {m.name!r} must be lower-case letters, digits and '-'")
    if m.area not in AREAS:
        raise MutantError(f"{source}: {m.name}: area {m.area!r} is not one of {', '.join(AREAS)}")
    if m.rule not in RULES:
        raise MutantError(f"{source}: {m.name}: rule {m.rule!r} is not one of {', '.join(RULES)}")
    if not m.find or m.find == m.replace:
        raise MutantError(f"{source}: {m.name}: 'find' must be non-empty and differ from 'replace'")
    p = Path(m.file)
    if p.is_absolute() or ".." in p.parts or p.suffix != ".py":
        raise MutantError(f"{source}: {m.name}: file {m.file!r} must be a .py path inside the repository")
    return m


def load_corpus(directory: Path = CORPUS) -> list[Mutant]:
    """Every mutant of `directory`: a file holds one mutant (top-level keys) or several ([[mutant]])."""
    out: list[Mutant] = []
    for path in sorted(Path(directory).glob("*.toml")):
        try:
            doc = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise MutantError(f"{path}: {exc}") from None
        entries = doc["mutant"] if "mutant" in doc else [doc]
        if not isinstance(entries, list):
            raise MutantError(f"{path}: 'mutant' must be an array of tables ([[mutant]])")
        out += [_mutant(e, path) for e in entries]
    names = [m.name for m in out]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise MutantError(f"duplicate mutant names: {', '.join(dups)}")
    return sorted(out, key=lambda m: (AREAS.index(m.area), m.name))


# --- code paths ---------------------------------------------------------------------------------------------

_MISSING = object()


def _config_value(config: dict, dotted: str) -> Any:
    """test.json `config` value at a dotted key ("broker.flush"); _MISSING when absent."""
    cur: Any = config
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def _norm(value: Any) -> Any:
    """acks=all is written "all" (test.json) or -1 (the broker's `ack` lines): one value for both."""
    if isinstance(value, str) and value.strip().lower() in ("all", "-1"):
        return -1
    return value


def _same(have: Any, want: Any) -> bool:
    """A marker's value matches: booleans only booleans, None only None, acks "all" and -1 alike, a
    number its number (1 and 1.0), a string its string (case aside)."""
    if have is _MISSING:
        return False
    have, want = _norm(have), _norm(want)
    if isinstance(want, bool) or isinstance(have, bool) or want is None or have is None:
        return have is want
    if isinstance(want, str) and isinstance(have, str):
        return have.lower() == want.lower()
    return type(have) is not str and type(want) is not str and have == want


def marker(m: Mutant) -> str:
    """The path marker in words: `truncate` why=offset-out-of-range."""
    fields = dict(m.reached)
    return f"`{fields.pop('event')}`" + "".join(f" {k}={json.dumps(v)}" for k, v in fields.items())


def paths_taken(mutants: list[Mutant], run_dir: Path) -> dict[str, dict | None]:
    """Did the run in `run_dir` take the code path each mutant changes (its `needs` and `reached`)? Per
    mutant name: None when it names neither; else {"taken", "lines" (marker lines in the nodes' event
    logs), "why"}. test.json and every event log are read once for all of them."""
    out: dict[str, dict | None] = {m.name: None for m in mutants if not (m.reached or m.needs)}
    marked = [m for m in mutants if m.reached or m.needs]
    if not marked:
        return out
    test = _read_json(run_dir / "test.json") or {}
    config = test.get("config") if isinstance(test.get("config"), dict) else {}
    scan: dict[str, dict[str, Any]] = {}            # mutant -> its marker's fields, for those the logs decide
    for m in marked:
        unmet = [(key, want, _config_value(config, key)) for key, want in m.needs
                 if not _same(_config_value(config, key), want)]
        if unmet:
            key, want, have = unmet[0]
            shown = "unset" if have is _MISSING else json.dumps(have)
            out[m.name] = {"taken": False, "lines": 0,
                           "why": f"the path needs {key} = {json.dumps(want)}; the run had {shown}"}
        elif not m.reached:
            out[m.name] = {"taken": True, "lines": 0, "why": "the run had the settings the path needs"}
        else:
            scan[m.name] = dict(m.reached)
    lines = dict.fromkeys(scan, 0)
    needles = {f'"{fields["event"]}"' for fields in scan.values()}
    for log_file in sorted((run_dir / "nodes").glob("*/broker.log")) if scan else ():
        with open(log_file, errors="replace") as fh:
            for line in fh:
                if not any(n in line for n in needles):
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(event, dict):
                    continue
                for name, fields in scan.items():
                    if all(_same(event.get(k, _MISSING), v) for k, v in fields.items()):
                        lines[name] += 1
    for m in marked:
        if m.name in scan:
            n = lines[m.name]
            out[m.name] = ({"taken": True, "lines": n, "why": f"{n} {marker(m)} line(s) in the event logs"} if n else
                           {"taken": False, "lines": 0,
                            "why": f"no {marker(m)} line in any event log: the run never took the path"})
    return out


def path_taken(m: Mutant, run_dir: Path) -> dict | None:
    """paths_taken for one mutant."""
    return paths_taken([m], run_dir)[m.name]


def run_dirs(roots: list[Path]) -> list[Path]:
    """Every run directory (one with a test.json and a nodes/ directory) under `roots`."""
    found = {p.parent.resolve() for root in roots for p in Path(root).rglob("test.json") if (p.parent / "nodes").is_dir()}
    return sorted(found)


def cmd_reach(mutants: list[Mutant], roots: list[Path]) -> int:
    """For every mutant with a path marker: in how many of the run directories under `roots` its path was
    taken (no run is started; point it at a results directory of default runs)."""
    dirs = run_dirs(roots)
    if not dirs:
        print(f"mutation: no run directory under {', '.join(map(str, roots))}", file=sys.stderr)
        return 2
    marked = [m for m in mutants if m.reached or m.needs]
    print(f"{len(dirs)} run directories under {', '.join(map(str, roots))}")
    print(f"{'mutant':34} {'runs that took its path':>24}  marker")
    per_dir = [paths_taken(marked, d) for d in dirs]         # each run directory read once
    for m in marked:
        seen = [taken[m.name] for taken in per_dir]
        runs = sum(bool(x and x["taken"]) for x in seen)
        lines = sum(x["lines"] for x in seen if x)
        needs = " ".join(f"{k}={json.dumps(v)}" for k, v in m.needs)
        print(f"{m.name:34} {runs:>9} of {len(dirs):<5} ({lines} lines)  "
              + (marker(m) if m.reached else "") + (f" with {needs}" if needs else ""))
    unmarked = [m.name for m in mutants if not (m.reached or m.needs)]
    print(f"without a marker ({len(unmarked)}): {', '.join(unmarked) or 'none'}")
    return 0


# --- trees --------------------------------------------------------------------------------------------------

def _outside_checkout(root: Path) -> Path:
    root = Path(root).resolve()
    if root == ROOT or ROOT in root.parents or root in ROOT.parents:
        raise MutantError(f"refusing to mutate {root}: it is (inside) the working tree {ROOT}")
    return root


def apply_mutant(m: Mutant, root: Path) -> Path:
    """Apply `m` to the tree at `root` (never the working tree); returns the mutated file."""
    path = _outside_checkout(root) / m.file
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise MutantError(f"{m.name}: {m.file} does not exist in the tree") from None
    n = text.count(m.find)
    if n != 1:
        raise MutantError(f"{m.name}: the 'find' snippet occurs {n} times in {m.file} (must be exactly once)")
    path.write_text(text.replace(m.find, m.replace))
    return path


def compile_file(path: Path) -> None:
    """Raise MutantError unless `path` compiles (nothing is written)."""
    try:
        compile(Path(path).read_text(), str(path), "exec")
    except SyntaxError as exc:
        raise MutantError(f"{path}: does not compile: {exc}") from None


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def snapshot(commit: str, dest: Path) -> Path:
    """Extract `commit` of the checkout into `dest` (git archive: committed files only)."""
    dest = _outside_checkout(dest)
    dest.mkdir(parents=True, exist_ok=False)
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                               stdout=subprocess.PIPE)
    tar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, capture_output=True)
    archive.stdout.close()
    if archive.wait() != 0 or tar.returncode != 0:
        raise MutantError(f"git archive {commit} into {dest} failed: {tar.stderr.decode()[-300:]}")
    return dest


def child_env(root: Path, spark_dir: Path | None = None) -> dict[str, str]:
    """The environment of every command run from a copy: the copy first on the import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    env.pop("PYTHONSAFEPATH", None)
    env["PYTHONUNBUFFERED"] = "1"
    if spark_dir is not None:
        env["HIGHWATER_SPARK_SERVICE_DIR"] = str(spark_dir)
    return env


# --- running commands ---------------------------------------------------------------------------------------

class Runner:
    """Runs one child at a time; SIGINT/SIGTERM are passed to it and stop the benchmark after it."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.stop = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._signal)

    def _signal(self, signum, _frame) -> None:
        self.stop = True
        log(f"{signal.Signals(signum).name}: stopping after the step in progress")
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGINT)

    def run(self, argv: list[str], cwd: Path, env: dict, out: Path, timeout_s: float) -> tuple[int | None, float]:
        """(exit code, or None after a timeout; seconds). Output goes to `out`."""
        t0 = time.monotonic()
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "ab") as fh:
            fh.write(f"$ {' '.join(argv)}\n".encode())
            fh.flush()
            self.child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                code = self._wait(timeout_s)
            finally:
                self.child = None
        return code, time.monotonic() - t0

    def _wait(self, timeout_s: float) -> int | None:
        child = self.child
        try:
            return child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass
        for sig, grace in ((signal.SIGINT, 120), (signal.SIGTERM, 30)):   # let highwater clean up first
            child.send_signal(sig)
            try:
                child.wait(grace)
                return None
            except subprocess.TimeoutExpired:
                continue
        os.killpg(child.pid, signal.SIGKILL)     # its own session: only what this benchmark started
        child.wait()
        return None


def log(msg: str) -> None:
    print(f"mutation: {msg}", flush=True)


def _latest(directory: Path) -> Path | None:
    link = directory / "latest"
    if link.exists():
        return link.resolve()
    subs = sorted((p for p in directory.glob("*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return subs[-1] if subs else None


def _read_json(path: Path | None) -> dict | None:
    try:
        return json.loads(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        return None


def _failed_kinds(res: dict) -> list[str]:
    """The kinds that failed the run: results.json `failed_kinds` (`failing_kinds` is the configured set),
    else those of `failing_kinds` found."""
    if isinstance(res.get("failed_kinds"), list):
        return list(res["failed_kinds"])
    anomalies = res.get("anomalies") or {}
    return [k for k in res.get("failing_kinds") or [] if (anomalies.get(k) or {}).get("count")]


def _tail(path: Path, n: int = 2) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[-300:]


@dataclass
class Options:
    time_limit: float = 60.0
    budget: float = 30.0
    checker: str | None = None
    seed: int | None = None
    nightly_budget: float = 3600.0
    suite: str = "suites/nightly.toml"
    python: str = sys.executable
    spark_dir: Path | None = None


class Bench:
    def __init__(self, opts: Options, results: Path, runner: Runner):
        self.opts, self.results, self.runner = opts, results, runner

    def highwater(self, root: Path, args: list[str], out: Path, timeout_s: float) -> tuple[int | None, float]:
        return self.runner.run([self.opts.python, "-c", BOOT, *args], cwd=root,
                               env=child_env(root, self.opts.spark_dir), out=out, timeout_s=timeout_s)

    def method(self, key: str, root: Path, name: str, out: Path, mutant: Mutant | None = None) -> dict:
        if key == "a":
            return self.run_a(root, name, out, mutant)
        return {"b": self.explore_b, "c": self.nightly_c}[key](root, name, out)

    def run_a(self, root: Path, name: str, out: Path, mutant: Mutant | None = None) -> dict:
        rd = out / "run"
        args = ["run", "--time-limit", f"{self.opts.time_limit:g}", "--results-dir", str(rd),
                "--test-name", name, "--plain"]
        if self.opts.checker:
            args += ["--checker", self.opts.checker]
        if self.opts.seed is not None:
            args += ["--seed", str(self.opts.seed)]
        code, secs = self.highwater(root, args, out / "run.log", self.opts.time_limit + 900)
        run_dir = _latest(rd / name) if (rd / name).exists() else None
        res = _read_json(run_dir / "results.json" if run_dir else None) or {}
        test = _read_json(run_dir / "test.json" if run_dir else None) or {}
        counts = {k: v.get("count", 0) for k, v in (res.get("anomalies") or {}).items()
                  if isinstance(v, dict) and v.get("count")}
        return {"exit_code": code, "verdict": VERDICTS.get(code, "timeout" if code is None else "error"),
                "caught": code == 1, "kinds": _failed_kinds(res), "counts": counts,
                "path": path_taken(mutant, run_dir) if mutant is not None and run_dir is not None else None,
                "unknown_reasons": res.get("unknown_reasons"), "seed": test.get("seed"),
                "elapsed_s": round(secs, 1), "dir": str(run_dir) if run_dir else None,
                "tail": "" if code in (0, 1) else _tail(out / "run.log")}

    def explore_b(self, root: Path, name: str, out: Path) -> dict:
        rd = out / "explore"
        args = ["explore", "--budget", f"{self.opts.budget:g}", *SAFE_EXPLORE, "--out", str(rd),
                "--name", name, "--plain"]
        if self.opts.seed is not None:
            args += ["--seed", str(self.opts.seed)]
        code, secs = self.highwater(root, args, out / "explore.log", self.opts.budget + 900)
        exp_dir = _latest(rd / name) if (rd / name).exists() else None
        ex = _read_json(exp_dir / "explore.json" if exp_dir else None) or {}
        found = {k: v for k, v in (ex.get("findings_by_invariant") or {}).items() if v}
        return {"exit_code": code, "verdict": {0: "nothing found", 1: "found"}.get(code, "timeout" if code is None
                                                                              else "error"),
                "caught": code == 1, "kinds": sorted(found), "counts": found, "seed": ex.get("seed"),
                "schedules": ex.get("schedules"), "elapsed_s": round(secs, 1),
                "dir": str(exp_dir) if exp_dir else None, "tail": "" if code in (0, 1) else _tail(out / "explore.log")}

    def nightly_c(self, root: Path, name: str, out: Path) -> dict:
        rd = out / "nightly"
        args = ["suite", str(root / self.opts.suite), "--results-dir", str(rd),
                "--budget", f"{self.opts.nightly_budget:g}"]
        code, secs = self.highwater(root, args, out / "nightly.log", self.opts.nightly_budget + 1800)
        bases = sorted((rd / "suites").glob("*")) if (rd / "suites").exists() else []
        suite_dir = _latest(bases[0]) if bases else None
        suite = _read_json(suite_dir / "suite.json" if suite_dir else None) or {}
        failed, kinds, other = [], set(), {}
        for c in suite.get("configs") or []:
            if c.get("status") == "failed":
                failed.append(c.get("name"))
                for r in c.get("repeats") or []:
                    kinds |= {k for k, v in (r.get("counts") or {}).items() if v}
            elif c.get("status") not in ("passed", None):
                other[c.get("name")] = c.get("status")
        return {"exit_code": code, "verdict": "caught" if failed else ("as expected" if suite else "error"),
                "caught": bool(failed), "kinds": sorted(kinds), "failed_configs": failed,
                "not_passed": other, "counts": suite.get("counts"), "elapsed_s": round(secs, 1),
                "dir": str(suite_dir) if suite_dir else None,
                "tail": "" if suite else _tail(out / "nightly.log")}

    # --- checks of the copies themselves ------------------------------------------------------------------
    def import_check(self, root: Path, m: Mutant) -> str:
        """Import the mutated module with the runs' environment; its file must be inside the copy."""
        code = (f"import importlib, json; m = importlib.import_module({m.module!r}); "
                f"import broker, harness.cli, clusters.local; "
                f"print(json.dumps([m.__file__, broker.__file__, harness.cli.__file__, str(clusters.local.REPO_ROOT)]))")
        r = subprocess.run([self.opts.python, "-c", code], cwd=root, env=child_env(root), capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            raise MutantError(f"{m.name}: importing {m.module} failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        paths = json.loads(r.stdout.strip().splitlines()[-1])
        outside = [p for p in paths if not Path(p).resolve().is_relative_to(root.resolve())]
        if outside:
            raise MutantError(f"{m.name}: loaded from outside the copy {root}: {', '.join(outside)}")
        return paths[0]

    def start_check(self, root: Path, m: Mutant) -> dict:
        """Start a controller and 3 brokers from the copy (clusters/bare.py, `python -m broker` with
        cwd = the copy): they must come up, elect a leader for every partition and still run a few seconds
        later. A few acks=all sends are tried too (information only)."""
        r = subprocess.run([self.opts.python, "-c", START_CHECK], cwd=root, env=child_env(root),
                           capture_output=True, text=True, timeout=180)
        try:
            out = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise MutantError(f"{m.name}: the cluster did not start: "
                              f"{(r.stderr.strip().splitlines() or ['?'])[-1][:300]}") from None
        if not out.get("ok"):
            raise MutantError(f"{m.name}: the cluster did not come up: {out.get('problem')}")
        return out

    def canary(self, commit: str) -> str:
        """A real `highwater run` from a copy whose broker processes print their path: every node's output
        must show a path inside the copy (what proves the mutants' runs use the mutated code)."""
        root = snapshot(commit, self.results / "copies" / "_canary")
        apply_mutant(CANARY, root)
        out = self.results / "_canary"
        args = ["run", "--time-limit", "3", "--nemesis", "none", "--checker", "reference", "--results-dir",
                str(out / "run"), "--test-name", "canary", "--plain"]
        code, secs = self.highwater(root, args, out / "run.log", 600)
        run_dir = _latest(out / "run" / "canary") if (out / "run" / "canary").exists() else None
        if run_dir is None:
            raise MutantError(f"canary: the run left no run directory (exit {code}): {_tail(out / 'run.log')}")
        seen, bad = {}, []
        for log_file in sorted((run_dir / "nodes").glob("*/stdout.log")):
            paths = re.findall(r"MUTATION-CANARY (\S+)", log_file.read_text(errors="replace"))
            node = log_file.parent.name
            seen[node] = paths
            if not paths or any(not Path(p).resolve().is_relative_to(root.resolve()) for p in paths):
                bad.append(f"{node}: {paths or 'no canary line'}")
        if not seen or bad or "c0" not in seen:
            raise MutantError(f"canary: not every node ran the copy's code: {'; '.join(bad) or seen}")
        shutil.rmtree(root, ignore_errors=True)
        return (f"canary ok: every node ({', '.join(sorted(seen))}) ran {root}/broker "
                f"(run exit {code}, {secs:.0f} s)")

    def stop_spark(self, root: Path | None) -> None:
        if self.opts.spark_dir is None or root is None or not (self.opts.spark_dir / "state.json").exists():
            return
        self.highwater(root, ["spark", "stop"], self.results / "spark-stop.log", 120)


START_CHECK = r'''
import json, sys, tempfile, time
from clusters import bare
from broker.client.producer import Producer
out = {"ok": False}
with tempfile.TemporaryDirectory(prefix="highwater-mutation-start-") as d:
    try:
        with bare.BareCluster(d, brokers=3, broker_settings={"min_insync_replicas": 2},
                                 topics=[{"name": "t", "partitions": 3, "replication_factor": 3}]) as c:
            deadline, leaders = time.monotonic() + 20, set()
            while time.monotonic() < deadline and len(leaders) < 3:
                leaders = {e.get("partition") for b in c.brokers for e in c.events(b)
                           if e.get("event") == "role" and e.get("role") == "leader"}
                time.sleep(0.2)
            sent = 0
            with Producer(c.controller_address, acks="all", timeout_s=3, retries=5) as p:
                for part in range(3):
                    try:
                        p.send("t", part, [b"mutation-smoke"])
                        sent += 1
                    except Exception as exc:
                        out.setdefault("send_errors", []).append(f"{type(exc).__name__}: {exc}"[:120])
            time.sleep(2.5)     # past a few checkpoint and ISR ticks: a mutant may crash the broker there
            errors = [e for b in c.brokers for e in c.events(b) if e.get("event") == "internal-error"]
            alive = c.controller.running() and all(n.running() for n in c.brokers.values())
            out.update(leaders=sorted(leaders), sent=sent, alive=alive, internal_errors=len(errors))
            out["ok"] = len(leaders) == 3 and alive and not errors
            if not out["ok"]:
                out["problem"] = (f"leaders for partitions {sorted(leaders)}, processes alive: {alive}, "
                                  f"internal errors: {[e.get('error') for e in errors][:2]}")
    except Exception as exc:
        out["problem"] = f"{type(exc).__name__}: {exc}"[:400]
print(json.dumps(out))
'''


# --- reporting ----------------------------------------------------------------------------------------------

def _cell(res: dict | None) -> str:
    if not res:
        return "-"
    return "CAUGHT" if res.get("caught") else res.get("verdict", "?")


def _found(rec: dict) -> str:
    """What each method that caught the mutant found."""
    parts = []
    for key, res in rec.get("methods", {}).items():
        if res.get("caught"):
            what = res.get("kinds") or res.get("failed_configs") or []
            if key == "c" and res.get("failed_configs"):
                what = [f"{', '.join(res['failed_configs'])}: {','.join(res.get('kinds') or []) or '?'}"]
            parts.append(f"{METHODS[key]}: {','.join(what) or '?'}")
    return "; ".join(parts)


def summarize(records: list[dict], methods: list[str]) -> dict:
    """Totals per method and overall, and per area and rule."""
    done = [r for r in records if "error" not in r and not r.get("interrupted")]
    equivalent = [r["name"] for r in done if r.get("equivalent")]
    done = [r for r in done if not r.get("equivalent")]
    totals: dict = {"mutants": len(records), "applied": len(done), "equivalent": equivalent,
                    "interrupted": [r["name"] for r in records if r.get("interrupted")], "by_method": {}, "by_area": {}, "by_rule": {}}
    for key in methods:
        ran = [r for r in done if key in r["methods"]]
        verdicts = [r["methods"][key].get("verdict") for r in ran]
        totals["by_method"][METHODS[key]] = {
            "ran": len(ran), "caught": sum(r["methods"][key].get("caught", False) for r in ran),
            "unknown": verdicts.count("unknown"), "timeout": verdicts.count("timeout"),
            "error": verdicts.count("error"), "seconds": round(sum(r["methods"][key].get("elapsed_s", 0) for r in ran), 1)}
    totals["caught_by_any"] = sum(bool(r["caught_by"]) for r in done)
    totals["escaped"] = [r["name"] for r in done if not r["caught_by"]]
    # escapes a default run could not have caught: it never took the code path the mutant changes
    totals["path_not_taken"] = [r["name"] for r in done if not r["caught_by"]
                                and ((r["methods"].get("a") or {}).get("path") or {}).get("taken") is False]
    for group in ("area", "rule"):
        agg = totals[f"by_{group}"]
        for r in done:
            a = agg.setdefault(r[group], {"mutants": 0, "caught": 0})
            a["mutants"] += 1
            a["caught"] += bool(r["caught_by"])
    return totals


def print_table(records: list[dict], methods: list[str], totals: dict) -> None:
    print()
    print(f"{'mutant':34} {'area':15} {'rule':24} " + " ".join(f"{METHODS[k]:19}" for k in methods) + " found")
    for r in records:
        if "error" in r:
            print(f"{r['name']:34} {r['area']:15} {r['rule']:24} ERROR {r['error']}")
            continue
        if r.get("interrupted"):
            print(f"{r['name']:34} {r['area']:15} {r['rule']:24} INTERRUPTED (not counted)")
            continue
        cells = " ".join(f"{_cell(r['methods'].get(k)) + ' ' + _secs(r['methods'].get(k)):19}" for k in methods)
        print(f"{r['name']:34} {r['area']:15} {r['rule']:24} {cells} {_found(r)}")
    print()
    n = totals["applied"]
    for meth, t in totals["by_method"].items():
        print(f"{meth:8} caught {t['caught']}/{t['ran']}  (unknown {t['unknown']}, timeout {t['timeout']}, "
              f"error {t['error']}; {t['seconds'] / 60:.1f} min)")
    print(f"caught by any method: {totals['caught_by_any']}/{n}")
    print("per area: " + ", ".join(f"{a} {v['caught']}/{v['mutants']}" for a, v in totals["by_area"].items()))
    if records and records[0]["name"] != "baseline":
        print(f"escaped ({len(totals['escaped'])}): {', '.join(totals['escaped']) or 'none'}")
        if totals.get("path_not_taken"):
            print(f"  of them, the run never took the mutated code path ({len(totals['path_not_taken'])}): "
                  f"{', '.join(totals['path_not_taken'])}")
    if totals.get("equivalent"):
        print(f"equivalent, not counted ({len(totals['equivalent'])}): {', '.join(totals['equivalent'])}")


def _secs(res: dict | None) -> str:
    return f"{res['elapsed_s']:.0f}s" if res and "elapsed_s" in res else ""


def write_json(path: Path | None, doc: dict) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    tmp.replace(path)


# --- commands -----------------------------------------------------------------------------------------------

def cmd_list(mutants: list[Mutant]) -> int:
    for m in mutants:
        print(f"{m.name:34} {m.area:15} {m.rule:24} {m.file}\n{'':34} {m.why}")
    print(f"\n{len(mutants)} mutants; areas: " + ", ".join(
        f"{a} {sum(m.area == a for m in mutants)}" for a in AREAS))
    missing = [r for r in RULES if not any(m.rule == r for m in mutants)]
    print("rules without a mutant: " + (", ".join(missing) or "none"))
    return 0


def cmd_check_apply(bench: Bench, mutants: list[Mutant], commit: str, canary: bool) -> int:
    failures, canary_ok = 0, None
    if canary:
        try:
            log(bench.canary(commit))
            canary_ok = True
        except MutantError as exc:
            log(f"CANARY FAILED: {exc}")
            canary_ok = False
    for i, m in enumerate(mutants, 1):
        if bench.runner.stop:
            break
        t0 = time.monotonic()
        root = bench.results / "copies" / m.name
        try:
            snapshot(commit, root)
            path = apply_mutant(m, root)
            compile_file(path)
            loaded = bench.import_check(root, m)
            started = bench.start_check(root, m)
            log(f"[{i}/{len(mutants)}] {m.name}: applies, compiles, imports from the copy ({loaded}), starts "
                f"(leaders {started['leaders']}, {started['sent']}/3 acks=all sends ok"
                f"{', ' + started['send_errors'][0] if started.get('send_errors') else ''}) "
                f"{time.monotonic() - t0:.0f}s")
        except (MutantError, subprocess.SubprocessError) as exc:
            failures += 1
            log(f"[{i}/{len(mutants)}] {m.name}: FAILED: {exc}")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    log(f"check-apply: {len(mutants) - failures}/{len(mutants)} mutants ok"
        + {None: "", True: "; canary ok", False: "; CANARY FAILED"}[canary_ok])
    return 0 if failures == 0 and canary_ok is not False else 1


def run_one(bench: Bench, m: Mutant | None, commit: str, methods: list[str], keep: bool) -> dict:
    """Every method on one mutant (None: the unmutated baseline)."""
    name = m.name if m else "baseline"
    rec: dict = {"name": name, "area": m.area if m else "-", "rule": m.rule if m else "-",
                 "why": m.why if m else "the unmutated tree", "file": m.file if m else None,
                 "equivalent": m.equivalent if m else "", "methods": {}, "caught_by": []}
    root = bench.results / "copies" / name
    try:
        snapshot(commit, root)
        if m is not None:
            compile_file(apply_mutant(m, root))
    except MutantError as exc:
        rec["error"] = str(exc)
        return rec
    out = bench.results / name
    for key in methods:
        if bench.runner.stop:
            rec["interrupted"] = True
            break
        log(f"  {name}: {METHODS[key]} ...")
        res = bench.method(key, root, name, out, m)
        rec["methods"][key] = res
        if bench.runner.stop:           # a signal came while it ran: its verdict says nothing
            rec["interrupted"] = True
        extra = (f" [{res['tail']}]" if res.get("tail") else "")
        found = ",".join(res.get("kinds") or res.get("failed_configs") or []) if res.get("caught") else ""
        log(f"  {name}: {METHODS[key]}: {_cell(res)} {found} (exit {res['exit_code']}, {res['elapsed_s']:.0f} s){extra}")
        if res.get("path") and not res.get("caught"):
            log(f"  {name}: its code path: {res['path']['why']}")
        if res.get("caught"):
            rec["caught_by"].append(METHODS[key])
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return rec


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated mutant names")
    ap.add_argument("--methods", default="a,b", help="comma-separated: a (run), b (explore), c (nightly) [a,b]")
    ap.add_argument("--nightly", action="store_true", help="also run the nightly suite (c) for the mutants that "
                                                          "escaped the other methods")
    ap.add_argument("--time-limit", type=float, default=60.0, help="method a's --time-limit [60]")
    ap.add_argument("--budget", type=float, default=30.0, help="method b's --budget [30]")
    ap.add_argument("--nightly-budget", type=float, default=3600.0, help="method c's suite --budget [3600]")
    ap.add_argument("--suite", default="suites/nightly.toml", help="method c's suite file, in the repository "
                                                                   "[suites/nightly.toml]")
    ap.add_argument("--checker", choices=("reference", "spark"), help="method a's checker [the run's default]")
    ap.add_argument("--seed", type=int, help="seed for methods a and b [a fresh one each]")
    ap.add_argument("--results-dir", help="where copies and runs go [a new temp dir]")
    ap.add_argument("--json", help="save the figures to this file (rewritten after every mutant)")
    ap.add_argument("--corpus", default=str(CORPUS), help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help="list the corpus and exit")
    ap.add_argument("--reach", nargs="+", metavar="DIR",
                    help="run nothing: for each mutant with a path marker, count the run directories under DIR "
                         "(e.g. the results of benchmarks/false_alarms.py) that took its code path")
    ap.add_argument("--check-apply", action="store_true", help="apply, compile, import and start every mutant "
                                                               "(and the canary); no highwater runs")
    ap.add_argument("--baseline", action="store_true", help="run the unmutated tree with the methods: must find nothing")
    ap.add_argument("--skip-canary", action="store_true", help="do not run the canary first")
    ap.add_argument("--keep-copies", action="store_true", help="keep each mutant's copy of the tree")
    return ap


def _select(a: argparse.Namespace) -> tuple[list[Mutant], list[str]]:
    """The mutants (--only of the corpus) and the methods asked for; MutantError if a name is unknown."""
    mutants = load_corpus(Path(a.corpus))
    if a.only:
        wanted = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in {m.name for m in mutants}]
        if unknown:
            raise MutantError(f"unknown mutant(s): {', '.join(unknown)}")
        mutants = [m for m in mutants if m.name in wanted]
    methods = [k.strip() for k in a.methods.split(",") if k.strip()]
    if not methods or any(k not in METHODS for k in methods):
        raise MutantError("--methods takes a, b and c")
    return mutants, methods


def _shown(a: argparse.Namespace, methods: list[str]) -> list[str]:
    """The methods the figures show: those asked for, and the nightly suite with --nightly."""
    return methods + (["c"] if a.nightly and "c" not in methods else [])


def _bench(a: argparse.Namespace, methods: list[str]) -> tuple[Bench, str, str]:
    """The results directory, the commit measured (and its subject) and the Bench that runs from copies of it."""
    results = Path(a.results_dir).resolve() if a.results_dir else Path(tempfile.mkdtemp(prefix="highwater-mutation-"))
    _outside_checkout(results)
    results.mkdir(parents=True, exist_ok=True)
    commit, subject = git("rev-parse", "HEAD"), git("log", "-1", "--format=%s")[:100]
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    uses_spark = a.checker != "reference" and ("a" in methods or "c" in methods or a.nightly)
    opts = Options(a.time_limit, a.budget, a.checker, a.seed, a.nightly_budget, a.suite,
                   spark_dir=results / "spark-service" if uses_spark else None)
    bench = Bench(opts, results, Runner())
    log(f"commit {commit[:12]} ({subject}){'; uncommitted changes in the working tree are NOT measured' if dirty else ''}")
    log(f"results in {results}")
    return bench, commit, subject


def _new_doc(a: argparse.Namespace, methods: list[str], bench: Bench, commit: str, subject: str) -> dict:
    return {"format": "highwater-mutation-1", "commit": commit, "commit_subject": subject,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "python": bench.opts.python,
            "results_dir": str(bench.results),
            "options": {"methods": methods, "nightly_for_escaped": a.nightly, "time_limit": a.time_limit,
                        "budget": a.budget, "nightly_budget": a.nightly_budget, "suite": a.suite,
                        "checker": a.checker or "run default", "seed": a.seed, "baseline": a.baseline},
            "records": []}


def _canary_ok(bench: Bench, a: argparse.Namespace, methods: list[str], doc: dict, json_path: Path | None) -> bool:
    """Runs the canary first when a method runs highwater from a copy (unless --skip-canary): False if it failed."""
    if a.skip_canary or not ("a" in methods or "c" in methods or a.nightly):
        return True
    try:
        doc["canary"] = bench.canary(doc["commit"])
        log(doc["canary"])
    except MutantError as exc:
        log(f"CANARY FAILED, nothing measured: {exc}")
        doc["canary"] = f"failed: {exc}"
        write_json(json_path, doc)
        return False
    return True


def _nightly_for_escaped(bench: Bench, m: Mutant | None, commit: str, rec: dict) -> None:
    """--nightly: the nightly suite on a mutant that escaped the other methods, added to its record."""
    name = rec["name"]
    root = bench.results / "copies" / name
    if not root.exists():
        snapshot(commit, root)
        if m is not None:
            apply_mutant(m, root)
    res = bench.nightly_c(root, name, bench.results / name)
    rec["methods"]["c"] = res
    log(f"  {name}: nightly: {_cell(res)} {','.join(res.get('failed_configs') or [])} "
        f"({res['elapsed_s']:.0f} s)")
    if res.get("caught"):
        rec["caught_by"].append("nightly")


def _measure_one(bench: Bench, a: argparse.Namespace, m: Mutant | None, step: str, methods: list[str],
                 commit: str) -> dict:
    """One mutant's record: every method, then the nightly suite if --nightly and it escaped them."""
    name = m.name if m else "baseline"
    log(f"{step} {name}" + (f" ({m.area}, {m.rule}): {m.why}" if m else ""))
    t0 = time.monotonic()
    keep = True if bench.opts.spark_dir is not None else a.keep_copies   # the Spark service may run from it
    rec = run_one(bench, m, commit, methods, keep)
    if (a.nightly and "c" not in methods and "error" not in rec and not rec["caught_by"]
            and not bench.runner.stop):
        log(f"  {name}: escaped {', '.join(METHODS[k] for k in methods)}: nightly suite ...")
        _nightly_for_escaped(bench, m, commit, rec)
    rec["elapsed_s"] = round(time.monotonic() - t0, 1)
    return rec


def _verdict(rec: dict, m: Mutant | None) -> str:
    if "error" in rec:
        return "ERROR " + rec["error"]
    if rec.get("interrupted"):
        return "INTERRUPTED (not counted)"
    if rec["caught_by"]:
        return "caught by " + ", ".join(rec["caught_by"])
    return "nothing found" if m is None else "ESCAPED"


def _measure(bench: Bench, a: argparse.Namespace, todo: list[Mutant | None], methods: list[str], doc: dict,
             json_path: Path | None) -> bool:
    """The canary, then every mutant of todo, its record saved after each; False if the canary failed.
    Stops the private Spark service at the end (and drops the copies it kept for it)."""
    last_root = None
    try:
        if not _canary_ok(bench, a, methods, doc, json_path):
            return False
        for i, m in enumerate(todo, 1):
            if bench.runner.stop:
                break
            rec = _measure_one(bench, a, m, f"[{i}/{len(todo)}]", methods, doc["commit"])
            last_root = bench.results / "copies" / rec["name"]
            log(f"[{i}/{len(todo)}] {rec['name']}: {_verdict(rec, m)} ({rec['elapsed_s']:.0f} s)")
            doc["records"].append(rec)
            doc["totals"] = summarize(doc["records"], _shown(a, methods))
            write_json(json_path, doc)
    finally:
        bench.stop_spark(last_root if last_root and last_root.exists() else None)
        if bench.opts.spark_dir is not None and not a.keep_copies:
            shutil.rmtree(bench.results / "copies", ignore_errors=True)
    return True


def _baseline_clean(doc: dict) -> bool:
    """--baseline: whether the unmutated tree ran with every method and none found anything."""
    rec = doc["records"][0] if doc["records"] else {}
    return bool(rec) and "error" not in rec and all(r.get("exit_code") == 0 or (k == "c" and not r.get("caught"))
                                                    for k, r in rec.get("methods", {}).items())


def _finish(bench: Bench, a: argparse.Namespace, doc: dict, methods: list[str], json_path: Path | None,
            t_all: float) -> int:
    """The totals saved and printed; the exit code."""
    shown = _shown(a, methods)
    doc["totals"] = summarize(doc["records"], shown)
    doc["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    doc["elapsed_s"] = round(time.monotonic() - t_all, 1)
    doc["interrupted"] = bench.runner.stop
    write_json(json_path, doc)
    print_table(doc["records"], shown, doc["totals"])
    log(f"commit {doc['commit'][:12]}; {doc['elapsed_s'] / 60:.1f} min; results in {bench.results}"
        + (f"; figures in {json_path}" if json_path else ""))
    if a.baseline:
        clean = _baseline_clean(doc)
        log("baseline: " + ("VALID everywhere (no false alarm)" if clean else "NOT clean: see above"))
        return 0 if clean else 1
    return 130 if bench.runner.stop else 0


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        mutants, methods = _select(a)
    except MutantError as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    if a.list:
        return cmd_list(mutants)
    if a.reach:
        return cmd_reach(mutants, [Path(d) for d in a.reach])
    bench, commit, subject = _bench(a, methods)
    if a.check_apply:
        return cmd_check_apply(bench, mutants, commit, canary=not a.skip_canary)
    doc = _new_doc(a, methods, bench, commit, subject)
    json_path = Path(a.json).resolve() if a.json else None
    t_all = time.monotonic()
    if not _measure(bench, a, [None] if a.baseline else list(mutants), methods, doc, json_path):
        return 255
    return _finish(bench, a, doc, methods, json_path, t_all)


if __name__ == "__main__":
    sys.exit(main())
