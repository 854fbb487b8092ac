"""`highwater run`: one chaos test from flags and/or a TOML test file (docs/running.md).

Flags override the test file, which overrides the defaults (harness/config.py). Progress goes to stderr
(a live panel on a terminal, plain lines otherwise); the last line on stdout is the run's report path.
SIGINT/SIGTERM end the run early but cleanly (heal, stop every process, keep the history).
Exit codes: 0 valid, 1 anomalies, 2 unknown (or interrupted), 254 bad arguments/config, 255 internal error.
"""
from __future__ import annotations

import copy
import signal
import sys
from typing import Any

import click

from broker.config_keys import section_keys
from harness import config as config_mod
from harness.setting_flags import flags
from workloads import workload as workload_settings
from harness.progress import Display
from harness.runner import run_test
from harness.cli import report_error
from harness.run_output import WORDS, finish_output, install_signal_handlers
from rundir.exits import EXIT_USAGE, worst as worst_exit


@click.command("run", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--test-file", type=click.Path(dir_okay=False), default=None, help="TOML test file (flags override it)")
@click.option("--test-name", default=None, help="name of the test (results/<name>/...) [chaos]")
@click.option("--nodes", type=int, default=None, help="number of brokers [3]")
@click.option("--partitions", type=int, default=None, help="partitions of the test topic [3]")
@click.option("--replication-factor", type=int, default=None, help="replicas per partition [3]")
@click.option("--time-limit", type=float, default=None, help="seconds of workload and faults [30]")
@flags((flag, config_mod.SCHEMA[f"workload.{key}"]) for flag, key in workload_settings.FLAGS.items())
@click.option("--nemesis", default=None, help="comma-separated faults, or 'none' [mix: the rotating mix]")
@click.option("--nemesis-interval", type=float, default=None, help="seconds between nemesis decisions [5]")
@click.option("--nemesis-schedule", default=None, help="explicit nemesis schedule file (TOML)")
@click.option("--acks", default=None, help="0 | 1 | all [all]")
@click.option("--client", default=None,
              help="native | kafka | mixed: the workload's client (kafka: a real Kafka client; mixed: both, worker "
                   "by worker; docs/clients.md) [mixed]")
@click.option("--kafka-library", default=None, help="with --client kafka or mixed: confluent | kafka-python [confluent]")
@click.option("--idempotence/--no-idempotence", default=None,
              help="with --client kafka: the idempotent producer (KIP-98); a duplicate then fails the run [off]")
@flags((k.flag, config_mod.SCHEMA[f"broker.{k.test}"]) for k in section_keys() if k.flag)
@click.option("--seed", type=int, default=None, help="random seed (default: a fresh one, recorded)")
@click.option("--backend", "--cluster", "backend", default=None,
              help="cluster backend: local | docker | ssh | external [local]")
@click.option("--bootstrap", default=None,
              help="external backend: host:port[,host:port] of a Kafka-compatible cluster")
@click.option("--docker-containers", default=None,
              help="external backend: the brokers' existing Docker containers, name[=node id],... (faults)")
@click.option("--nodes-file", default=None,
              help="ssh backend: TOML file listing the controller and brokers; external: the brokers' SSH hosts")
@click.option("--ssh-accept-unknown-hosts", is_flag=True, default=None,
              help="ssh backend: accept host keys missing from known_hosts [reject]")
@click.option("--base-image", default=None, help="docker backend: existing base image instead of the debootstrap one")
@click.option("--results-dir", default=None, help="results directory [results]")
@click.option("--final-wait", type=float, default=None, help="bound on the final phase's recovery wait, s [60]")
@click.option("--checker", default=None, help="checker engine: spark | reference [spark]")
@click.option("--plain", is_flag=True, default=False, help="plain progress lines even on a terminal")
@click.option("--test-count", type=click.IntRange(min=1), default=1,
              help="run the test N times (seeds S, S+1, ... with --seed); exit with the worst verdict [1]")
def run(test_file, plain, test_count, **flags) -> int:
    """Run a chaos test against a cluster of our broker and check it."""
    try:
        cfg = config_mod.build(test_file, flags)
    except config_mod.ConfigError as exc:
        click.echo(f"highwater: {exc}", err=True)
        return EXIT_USAGE
    if test_count > 1:
        return run_many(cfg, test_count, plain=plain)
    return execute(cfg, plain=plain)


def execute(cfg, *, plain: bool = False, extra_record: dict | None = None, state: dict | None = None) -> int:
    """One run of a checked configuration with the live progress, signals routed to it and the verdict;
    returns its exit code. `extra_record` goes into test.json; `state` receives the session."""
    state = {} if state is None else state

    def hook(session):
        state["session"] = session
        state["previous"] = install_signal_handlers(session)
        state["display"] = Display(session.progress, force_plain=plain).start()
        click.echo(f"highwater: run {session.run.run_id} in {session.run.path} "
                   f"(seed {session.cfg.seed}, {cfg.broker.truncation}, acks={cfg.client.acks}, "
                   f"{_client_label(cfg)}, "
                   f"min.insync.replicas={cfg.broker.min_insync_replicas}, faults "
                   f"{','.join(cfg.nemesis.faults) or 'none'})", err=True)

    try:
        outcome = run_test(cfg, session_hook=hook, on_tick=lambda s: state["display"].update(),
                           extra_record=extra_record)
    except Exception as exc:  # noqa: BLE001 - run_test cleans up itself
        return report_error(exc)
    finally:
        if "display" in state:
            state["display"].close()
        for sig, handler in state.get("previous", {}).items():
            signal.signal(sig, handler)
    return finish_output(outcome)



def _client_label(cfg) -> str:
    """How the run line names the workload's clients."""
    if cfg.client.kind == "kafka":
        return f"kafka client {cfg.client.library}"
    if cfg.client.kind == "mixed":
        return f"native and {cfg.client.library} clients"
    return "native client"


def run_many(cfg: config_mod.TestConfig, count: int, *, plain: bool = False, run_one=None) -> int:
    """`highwater run --test-count N`: run `cfg` `count` times (`execute`, one after another); with a seed S
    run k uses S + k - 1 (as suites do), else each run draws a fresh seed. A one-line summary after each run
    and a final one on stderr; the exit code is the worst of the runs' (rundir/exits.py worst). An
    interrupted run ends the series."""
    run_one = execute if run_one is None else run_one
    base = cfg.seed
    codes: list[int] = []
    for k in range(1, count + 1):
        c = copy.deepcopy(cfg)
        c.seed = base + k - 1 if base is not None else None
        state: dict[str, Any] = {}
        click.echo(f"highwater: test {k}/{count}" + (f" (seed {c.seed})" if c.seed is not None else ""), err=True)
        code = run_one(c, plain=plain, extra_record={"test_count": {"index": k, "count": count}}, state=state)
        codes.append(code)
        session = state.get("session")
        where = f"; {session.run.path}" if session is not None else ""
        click.echo(f"highwater: test {k}/{count}: seed {c.seed}: {WORDS.get(code, 'error')} (exit {code}){where}",
                   err=True)
        if session is not None and session.interrupt.is_set():
            break
    tally = {w: sum(1 for x in codes if WORDS.get(x, "error") == w) for w in
             ("valid", "invalid", "unknown", "setup error", "internal error", "error")}
    shown = ", ".join(f"{n} {w}" for w, n in tally.items() if n or w in ("valid", "invalid", "unknown"))
    worst = worst_exit(codes)
    cut = f" (interrupted after {len(codes)} of {count})" if len(codes) < count else ""
    click.echo(f"highwater: {len(codes)} runs{cut}: {shown}; worst: {WORDS.get(worst, 'error')} (exit {worst})",
               err=True)
    return worst   # an interrupted run is itself unknown (exit 2), so a cut series is never "valid"


if __name__ == "__main__":
    sys.exit(run.main(standalone_mode=False))
