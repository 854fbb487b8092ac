"""controller.json validation (broker/controller/config.py) and the durable state file (store.py)."""
from __future__ import annotations

import os

import pytest

from broker.controller.config import ConfigError, load_controller_config
from broker.controller.messages import TopicSpec
from broker.controller.store import STATE_FILE, StateStore
from config_files import assert_one_line_error, write_config

GOOD = {"host": "127.0.0.1", "port": 0, "data_dir": "d", "log_file": "l.log"}


def write(tmp_path, obj, name="controller.json"):
    return write_config(tmp_path, name, obj)


def test_defaults_are_filled_in(tmp_path):
    c = load_controller_config(write(tmp_path, GOOD))
    assert (c.broker_session_timeout_ms, c.unclean_leader_election, c.topics, c.brokers_needed) == (3000, False, (), 0)


def test_topics_and_brokers_needed(tmp_path):
    cfg = {**GOOD, "topics": [{"name": "hw", "partitions": 3, "replication_factor": 2}]}
    c = load_controller_config(write(tmp_path, cfg))
    assert c.topics == (TopicSpec("hw", 3, 2),)
    assert c.brokers_needed == 2
    assert load_controller_config(write(tmp_path, {**cfg, "expected_brokers": 5})).brokers_needed == 5
    stamped = {**GOOD, "topics": [{"name": "hw", "partitions": 1, "replication_factor": 1,
                                   "configs": {"message.timestamp.type": "LogAppendTime"}}]}
    assert load_controller_config(write(tmp_path, stamped)).topics == (
        TopicSpec("hw", 1, 1, (("message.timestamp.type", "LogAppendTime"),)),)


@pytest.mark.parametrize("change, message", [
    ({"port": "x"}, "key 'port': must be an integer, got 'x'"),
    ({"port": 70000}, "key 'port': must be at most 65535, got 70000"),
    ({"unclean_leader_election": "yes"}, "key 'unclean_leader_election': must be true or false, got 'yes'"),
    ({"broker_session_timeout_ms": 0}, "key 'broker_session_timeout_ms': must be at least 100, got 0"),
    ({"sesion_timeout": 1}, "key 'sesion_timeout': unknown key"),
    ({"topics": [{"name": "hw", "partitions": 0, "replication_factor": 1}]},
     "key 'topics[0].partitions': must be a positive integer, got 0"),
    ({"data_dir": ""}, "key 'data_dir': must be a non-empty string, got ''"),
    ({"topics": [{"name": "hw", "partitions": 1, "replication_factor": 1, "configs": {"retention.ms": "1"}}]},
     "key 'topics[0].configs': unsupported topic config 'retention.ms' (supported: message.timestamp.type)"),
    ({"topics": [{"name": "hw", "partitions": 1, "replication_factor": 1, "configs": ["x"]}]},
     "key 'topics[0].configs': must be a map of topic configs, got ['x']"),
])
def test_bad_values_name_the_file_and_key(tmp_path, change, message):
    assert_one_line_error(load_controller_config, ConfigError, write(tmp_path, {**GOOD, **change}), message)


def test_missing_key_and_bad_json(tmp_path):
    path = write(tmp_path, {k: v for k, v in GOOD.items() if k != "log_file"})
    with pytest.raises(ConfigError, match=r"controller\.json: key 'log_file': missing \(required\)$"):
        load_controller_config(path)
    path = write(tmp_path, '{"host": "127.0.0.1",\n "port": }')
    with pytest.raises(ConfigError, match=r"controller\.json:2: not valid JSON"):
        load_controller_config(path)


def test_state_file_is_replaced_atomically_and_read_back(tmp_path):
    store = StateStore(tmp_path / "data")
    assert store.load() is None
    store.save({"format": 1, "version": 1})
    store.save({"format": 1, "version": 2})
    assert store.load() == {"format": 1, "version": 2}
    assert sorted(os.listdir(tmp_path / "data")) == [STATE_FILE]      # no temp file left behind
    assert store.writes == 2


def test_unreadable_state_file_names_the_file(tmp_path):
    (tmp_path / STATE_FILE).write_text('{"format": 1,')
    with pytest.raises(ConfigError, match=rf"{STATE_FILE}:1: not valid JSON"):
        StateStore(tmp_path).load()
