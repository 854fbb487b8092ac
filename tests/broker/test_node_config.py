"""broker.json validation (broker/config.py) and `python -m broker node` exiting 2 on bad config."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError, load_broker_config
from config_files import assert_one_line_error, write_config

REPO = Path(__file__).resolve().parents[2]
GOOD = {"node_id": 2, "host": "127.0.0.1", "port": 9092, "controller_host": "127.0.0.1", "controller_port": 9000,
        "data_dir": "/tmp/x", "log_file": "/tmp/x.log"}


def write(tmp_path: Path, obj) -> Path:
    return write_config(tmp_path, "broker.json", obj)


def test_defaults_filled_in(tmp_path):
    cfg = load_broker_config(write(tmp_path, GOOD))
    assert cfg == BrokerConfig(**GOOD)
    assert (cfg.truncation, cfg.min_insync_replicas, cfg.flush, cfg.power_loss) == ("leader-epoch", 1, "always", False)
    assert (cfg.replica_lag_time_max_ms, cfg.hw_checkpoint_interval_ms, cfg.segment_records) == (2000, 500, 100000)
    assert cfg.node_name == "n2"


@pytest.mark.parametrize("change, message", [
    ({"port": "x"}, "key 'port': must be an integer, got 'x'"),
    ({"port": 70000}, "key 'port': must be at most 65535, got 70000"),
    ({"truncation": "epoch"}, "key 'truncation': must be one of hw, leader-epoch, got 'epoch'"),
    ({"flush": "sometimes"}, "key 'flush': must be one of always, interval, never, got 'sometimes'"),
    ({"power_loss": 1}, "key 'power_loss': must be true or false, got 1"),
    ({"min_insync_replicas": 0}, "key 'min_insync_replicas': must be at least 1, got 0"),
    ({"node_id": True}, "key 'node_id': must be an integer, got True"),
    ({"replica_lag_tim_max_ms": 5}, "key 'replica_lag_tim_max_ms': unknown key"),
])
def test_bad_values_name_file_and_key(tmp_path, change, message):
    assert_one_line_error(load_broker_config, ConfigError, write(tmp_path, {**GOOD, **change}), message)


def test_missing_key_and_bad_json(tmp_path):
    path = write(tmp_path, {k: v for k, v in GOOD.items() if k != "data_dir"})
    with pytest.raises(ConfigError, match=r"broker\.json: key 'data_dir': missing \(required\)$"):
        load_broker_config(path)
    path = write(tmp_path, '{"node_id": 1,\n "host": }')
    with pytest.raises(ConfigError, match=r"broker\.json:2: not valid JSON"):
        load_broker_config(path)
    with pytest.raises(ConfigError, match=r"nope\.json: cannot read"):
        load_broker_config(tmp_path / "nope.json")


def test_node_exits_2_with_one_line(tmp_path):
    path = write(tmp_path, {**GOOD, "flush": 3})
    r = subprocess.run([sys.executable, "-m", "broker", "node", "--config", str(path)], cwd=REPO,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"broker: {path}: key 'flush': must be a string, got 3"]
    assert r.stdout == ""


def test_unusable_port_and_log_file_exit_2(tmp_path):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = write(tmp_path, {**GOOD, "port": port, "data_dir": str(tmp_path / "d"),
                                "log_file": str(tmp_path / "n.log")})
        r = subprocess.run([sys.executable, "-m", "broker", "node", "--config", str(path)], cwd=REPO,
                           capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"broker: {path}: key 'port': cannot listen on 127.0.0.1:{port} (Address already in use)"]
    (tmp_path / "file").write_text("")
    path = write(tmp_path, {**GOOD, "data_dir": str(tmp_path / "d"), "log_file": str(tmp_path / "file" / "n.log")})
    r = subprocess.run([sys.executable, "-m", "broker", "node", "--config", str(path)], cwd=REPO,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"broker: {path}: key 'log_file': cannot open {tmp_path / 'file' / 'n.log'} (File exists)"]
