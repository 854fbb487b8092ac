"""Reproducing a run: `highwater rerun RUN_DIR`.

    highwater rerun RUN_DIR [--results-dir D] [--plain]

`rerun` reads RUN_DIR/test.json and runs the same configuration with the same seed into a new run
directory whose test.json says `"rerun_of"`. A scenario run is replayed as that scenario (its file must
still hold the steps recorded). The new run goes into the results directory that holds RUN_DIR
(RUN_DIR/../..), or `results` when RUN_DIR belongs to a suite, unless --results-dir says otherwise.

(`highwater run --test-count N`, one configuration run N times, is harness/run_command.py's run_many.)
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from harness import config as config_mod
from harness import scenario as scenario_mod
from harness.run_command import execute as execute_run
from harness.scenario_command import play
from harness.scenario_runner import scenario_faults, scenario_record
from rundir import formats as runformat
from rundir.exits import EXIT_USAGE
from broker.errors import ConfigError


# --- rerun --------------------------------------------------------------------------------------------

def load_run(run_dir: Path | str, results_dir: str | None = None) -> tuple[dict[str, Any], config_mod.TestConfig]:
    """test.json of RUN_DIR and the checked configuration that repeats it (same settings and seed; the
    results directory as described in the module docstring). Raises ConfigError."""
    run_dir = Path(run_dir)
    path = run_dir / runformat.TEST_JSON
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: not a run directory")
    try:
        test = runformat.load_json(path)
    except runformat.FormatError as exc:
        raise ConfigError(f"{exc} (a run directory without a usable test.json cannot be rerun)") from None
    if not isinstance(test, dict) or not isinstance(test.get("config"), dict):
        raise ConfigError(f"{path}: field 'config' is missing or not an object; cannot rerun")
    seed = test.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"{path}: field 'seed' must be the integer seed the run used, got {seed!r}")
    try:
        cfg = config_mod.from_dict(test["config"])
    except KeyError as exc:
        raise ConfigError(f"{path}: field 'config': unknown key {exc.args[0]!r}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: field 'config': {exc}") from None
    cfg.seed = seed
    if results_dir is not None:
        cfg.results_dir = results_dir
    else:
        root = run_dir.resolve().parent.parent
        if (root / "suite.json").exists():  # results/suites/<suite>/<timestamp>/<config>/<timestamp>
            root = root.parents[2]
        recorded = Path(cfg.results_dir)
        # the recorded spelling when it still names that directory, so the two configurations compare equal
        cfg.results_dir = cfg.results_dir if recorded.resolve() == root.resolve() else str(root)
    config_mod.check(cfg, source=str(path))
    return test, cfg


def rerun_record(run_dir: Path, test: dict[str, Any]) -> dict[str, Any]:
    """test.json's "rerun_of" of the new run."""
    return {"rerun_of": {"run_dir": str(Path(run_dir).resolve()), "run_id": test.get("run_id"),
                         "timestamp": test.get("timestamp"), "seed": test.get("seed")}}


def load_scenario(test: dict[str, Any], cfg: config_mod.TestConfig, path: Path):
    """The recorded scenario, with the recorded configuration; its file must still hold the same steps."""
    rec = test.get("scenario")
    if not isinstance(rec, dict) or not isinstance(rec.get("path"), str):
        raise ConfigError(f"{path}: field 'scenario' must record the scenario file (kind is 'scenario')")
    try:
        sc = scenario_mod.load(rec["path"], truncation=cfg.broker.truncation)
    except scenario_mod.ConfigError as exc:
        raise ConfigError(f"{path}: field 'scenario.path': the scenario no longer loads: {exc}") from None
    now = scenario_record(sc)["steps"]          # the same record test.json holds
    if isinstance(rec.get("steps"), list) and now != rec["steps"]:
        raise ConfigError(f"{path}: field 'scenario.steps': {rec['path']} has changed since the run; "
                         "a rerun would not replay the same steps")
    sc.config = cfg
    return sc


@click.command("rerun", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_dir", type=click.Path(file_okay=True, dir_okay=True))
@click.option("--results-dir", default=None,
              help="results directory [the one holding RUN_DIR; results for a suite's run]")
@click.option("--plain", is_flag=True, default=False, help="plain progress lines even on a terminal")
def rerun(run_dir, results_dir, plain) -> int:
    """Repeat the run in RUN_DIR: same configuration and seed, into a new run directory."""
    try:
        test, cfg = load_run(run_dir, results_dir)
        path = Path(run_dir) / runformat.TEST_JSON
        extra = rerun_record(Path(run_dir), test)
        if test.get("kind") == "scenario":
            sc = load_scenario(test, cfg, path)
            config_mod.preflight(cfg, where=lambda _key: str(path), faults=scenario_faults(sc))
        else:
            config_mod.preflight(cfg, where=lambda _key: str(path))
    except (ConfigError, config_mod.ConfigError) as exc:
        click.echo(f"highwater: {exc}", err=True)
        return EXIT_USAGE
    click.echo(f"highwater: rerun of {run_dir} (seed {cfg.seed})", err=True)
    if test.get("kind") == "scenario":
        return play(sc, plain=plain, extra_record=extra, banner="rerun of scenario")
    return execute_run(cfg, plain=plain, extra_record=extra)


if __name__ == "__main__":
    sys.exit(rerun.main(standalone_mode=False))
