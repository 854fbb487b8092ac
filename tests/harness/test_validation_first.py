"""Nothing starts before everything is validated: `highwater run`, `scenario` and `suite` check every
argument, test file, schedule file, nodes file and backend choice before a run directory exists. A
rejected command exits 254 with one line naming the flag or file:line and the key, and leaves the results
store exactly as it was: no new directory, `latest` not moved, index.html unchanged."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import config as config_mod
from harness.cli import main
from rundir.exits import EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]


def _store(tmp_path: Path) -> Path:
    """A results directory holding one earlier run, its `latest` links and an index page."""
    root = tmp_path / "res"
    run = root / "chaos" / "20260101T000000Z"
    run.mkdir(parents=True)
    (run / "test.json").write_text('{"name": "chaos", "timestamp": "20260101T000000Z", "seed": 1}\n')
    os.symlink("20260101T000000Z", root / "chaos" / "latest")
    os.symlink("chaos/20260101T000000Z", root / "latest")
    (root / "index.html").write_text("<html>the index before</html>")
    return root


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under root with what it is: a link's target, a file's content, a directory."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_text()
    return out


def _reject(capsys, root: Path, *args: str) -> str:
    """Run the command; it must exit 254 with one stderr line and leave the store untouched."""
    before = _snapshot(root)
    capsys.readouterr()
    rc = main(list(args))
    err = capsys.readouterr().err.strip()
    assert rc == EXIT_USAGE, err
    assert "\n" not in err, err
    assert _snapshot(root) == before
    return err


def test_unknown_backend_flag(tmp_path, capsys):
    root = _store(tmp_path)
    err = _reject(capsys, root, "run", "--backend", "k8s", "--results-dir", str(root))
    assert err == "highwater: --backend: key 'cluster.backend' must be one of local, docker, ssh, external, got 'k8s'"


# One row a rejected file: its name, its text (None: the file does not exist), the flags before it and the
# one stderr line after "highwater: " ({f} is the file's path).
BAD_FILES = [
    pytest.param("t.toml", 'name = "x"\ntime_limit = 5\n\n[cluster]\nnodes = 3\nbackend = "k8s"\n', ("--test-file",),
                 "{f}:6: key 'cluster.backend' must be one of local, docker, ssh, external, got 'k8s'",
                 id="unknown_backend_in_a_test_file"),
    pytest.param("nope.toml", None, ("--nemesis-schedule",),
                 "--nemesis-schedule: key 'nemesis.schedule_file': {f}: cannot read "
                 "schedule file: No such file or directory",
                 id="missing_schedule_file"),
    pytest.param("s.toml", '[[step]]\nat = 1\nfault = "kill"\nduration = 2\n\n[[step]]\nat = 5\nfault = "kill"\n'
                 'duration = 1\ntargets = ["n9"]\n', ("--nemesis-schedule",),
                 "--nemesis-schedule: key 'nemesis.schedule_file': {f}:6: step 2: field "
                 "'targets': unknown node 'n9' (nodes: c0, n1, n2, n3)",
                 id="bad_schedule_content_names_file_line_field"),
    pytest.param("s.toml", '[[step]]\nat = 1\nfault = "power-loss"\nduration = 2\n', ("--nemesis-schedule",),
                 "--nemesis-schedule: key 'nemesis.schedule_file' injects power-loss faults, "
                 "which need broker.power_loss = true (--power-loss)",
                 id="schedule_with_power_loss_needs_power_loss_brokers"),
    pytest.param("t.toml", 'name = "x"\n[workload]\nrate = "fast"\n', ("--test-file",),
                 "{f}:3: key 'workload.rate' must be a number, got 'fast'",
                 id="bad_test_file"),
    pytest.param("absent.toml", None, ("--test-file",),
                 "{f}: cannot read test file (No such file or directory)",
                 id="missing_test_file"),
    pytest.param("nodes.toml", '[controller]\nhost = "10.0.0.1"\n\n[[broker]]\nhost = "10.0.0.2"\nport = 99999\n',
                 ("--backend", "ssh", "--nodes-file"),
                 "--nodes-file: key 'cluster.nodes_file': nodes file {f}: [[broker]] #1 "
                 "(line 4): field 'port' must be a port number 1..65535, got 99999",
                 id="ssh_bad_nodes_file"),
    pytest.param("nodes.toml", '[controller]\nhost = "10.0.0.1"\n\n[[broker]]\nhost = "10.0.0.2"\n',
                 ("--backend", "ssh", "--nodes-file"),
                 "--nodes-file: key 'cluster.nodes_file': nodes file {f}: lists 1 brokers "
                 "but the test needs 3",
                 id="ssh_nodes_file_with_too_few_brokers"),
]


@pytest.mark.parametrize("name, text, flags, message", BAD_FILES)
def test_bad_or_missing_file(tmp_path, capsys, name, text, flags, message):
    root = _store(tmp_path)
    f = tmp_path / name
    if text is not None:
        f.write_text(text)
    err = _reject(capsys, root, "run", *flags, str(f), "--results-dir", str(root))
    assert err == "highwater: " + message.format(f=f)


def test_schedule_checked_against_the_cluster_size(tmp_path, capsys):
    """n3 exists in the default 3-broker cluster but not with --nodes 2."""
    root = _store(tmp_path)
    s = tmp_path / "s.toml"
    s.write_text('[[step]]\nat = 1\nfault = "kill"\nduration = 2\ntargets = ["n3"]\n')
    err = _reject(capsys, root, "run", "--nodes", "2", "--replication-factor", "2", "--min-insync-replicas", "1",
                  "--nemesis-schedule", str(s), "--results-dir", str(root))
    assert err.endswith(f"{s}:1: step 1: field 'targets': unknown node 'n3' (nodes: c0, n1, n2)")


@pytest.mark.parametrize("args, message", [
    (("--rate", "0"), "--rate: key 'workload.rate' must be above 0, got 0.0"),
    (("--time-limit", "-3"), "--time-limit: must be a non-negative number, got -3.0"),
    (("--nodes", "0"), "--nodes: key 'cluster.nodes' must be at least 1, got 0"),
    # the workload flags are made from their declarations (workloads/workload.py): the setting's check
    (("--concurrency", "x"), "--concurrency: must be an integer, got 'x'"),
])
def test_bad_numeric_options(tmp_path, capsys, args, message):
    root = _store(tmp_path)
    err = _reject(capsys, root, "run", *args, "--results-dir", str(root))
    assert err == f"highwater: {message}"


def test_ssh_without_nodes_file(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HIGHWATER_NODES_FILE", raising=False)
    root = _store(tmp_path)
    err = _reject(capsys, root, "run", "--backend", "ssh", "--results-dir", str(root))
    assert err == ("highwater: --backend: key 'cluster.backend': the ssh backend needs a nodes file "
                   "(--nodes-file FILE)")


def test_bad_scenario_file(tmp_path, capsys):
    root = _store(tmp_path)
    f = tmp_path / "s.toml"
    f.write_text('[[step]]\ndo = "kill"\n')
    err = _reject(capsys, root, "scenario", str(f), "--results-dir", str(root))
    assert err == f"highwater: {f}:1: step 1 (kill): field 'node' is missing"


def test_suite_with_a_missing_schedule_creates_no_suite_directory(tmp_path, capsys):
    root = _store(tmp_path)
    suite = tmp_path / "s.toml"
    suite.write_text('name = "v"\n[defaults]\ntime_limit = 5\nchecker = "reference"\n\n'
                     '[[test]]\nname = "ok"\nsafe = true\n\n'
                     '[[test]]\nname = "sched"\nsafe = true\nnemesis_schedule = "missing.toml"\n')
    err = _reject(capsys, root, "suite", str(suite), "--results-dir", str(root))
    assert err == (f"highwater: {suite}: configuration 'sched': key 'nemesis.schedule_file': "
                   f"{tmp_path / 'missing.toml'}: cannot read schedule file: No such file or directory")
    assert not (root / "suites").exists()


def test_suite_with_an_unknown_backend(tmp_path, capsys):
    root = _store(tmp_path)
    suite = tmp_path / "s.toml"
    suite.write_text('name = "v"\n[[test]]\nname = "k"\nsafe = true\nbackend = "k8s"\n')
    err = _reject(capsys, root, "suite", str(suite), "--results-dir", str(root))
    assert "backend" in err and "'k8s'" in err and str(suite) in err


def test_run_session_refuses_a_bad_configuration_before_creating_anything(tmp_path):
    """The library entry point checks again: a caller that skipped the command's validate step still
    gets no run directory."""
    from harness.lifecycle import RunSession
    root = _store(tmp_path)
    cfg = config_mod.TestConfig(results_dir=str(root))
    cfg.cluster.backend = "k8s"
    before = _snapshot(root)
    with pytest.raises(config_mod.ConfigError, match="cluster.backend"):
        RunSession(cfg)
    assert _snapshot(root) == before


def test_valid_configuration_passes_the_validate_step(tmp_path):
    """Clean case: the same checks accept a good schedule and the project's own suites."""
    s = tmp_path / "s.toml"
    s.write_text('[[step]]\nat = 1\nfault = "kill"\nduration = 2\ntargets = ["n2"]\n')
    cfg = config_mod.build(None, {"nemesis_schedule": str(s), "nemesis": "kill"})
    assert cfg.nemesis.schedule_file == str(s)
    from harness.suite_command import validate_configs
    from harness.suite_file import load_suite
    for name in ("smoke.toml", "nightly.toml"):
        suite = load_suite(REPO / "suites" / name)
        assert validate_configs(suite.configs, name) is None


def test_a_relative_schedule_path_is_recorded_absolute(tmp_path, monkeypatch):
    """test.json records the schedule by its absolute path, so `highwater rerun` works from any directory."""
    (tmp_path / "s.toml").write_text('[[step]]\nat = 1\nfault = "kill"\nduration = 2\ntargets = ["n2"]\n')
    monkeypatch.chdir(tmp_path)
    cfg = config_mod.build(None, {"nemesis_schedule": "s.toml", "nemesis": "kill"})
    assert cfg.nemesis.schedule_file == str(tmp_path.resolve() / "s.toml")
