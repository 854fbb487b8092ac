"""Unit tests for harness/config.py: defaults, TOML loading, flag overrides, one-line errors."""
from __future__ import annotations

import pytest

from harness import config as C


def write(tmp_path, text):
    p = tmp_path / "t.toml"
    p.write_text(text)
    return p


def test_defaults_are_the_safe_demo():
    cfg = C.build()
    assert (cfg.cluster.backend, cfg.cluster.nodes) == ("local", 3)
    assert (cfg.topic.partitions, cfg.topic.replication_factor) == (3, 3)
    assert cfg.broker.truncation == "leader-epoch"
    assert cfg.client.acks == "all"
    assert cfg.broker.min_insync_replicas == 2
    assert cfg.broker.unclean_leader_election is False
    assert cfg.nemesis.faults == ["mix"]       # the rotating mix, power loss included:
    assert cfg.broker_settings()["power_loss"] is True and cfg.broker.flush == "always"
    assert cfg.time_limit == 30.0
    assert cfg.seed is None
    assert cfg.with_seed().seed is not None
    assert cfg.client.kind == "mixed" and cfg.broker.replica_fetch_max_records == 32
    assert cfg.broker_settings()["replica_fetch_max_records"] == 32


def test_test_json_records_the_power_loss_the_brokers_ran_with():
    mixed = C.build()
    assert mixed.broker.power_loss is False and mixed.recorded()["broker"]["power_loss"] is True
    calm = C.build(None, {"nemesis": "kill,partition"})
    assert calm.recorded()["broker"]["power_loss"] is False
    assert C.from_dict(mixed.recorded()).broker_settings() == mixed.broker_settings()


def test_toml_then_flags(tmp_path):
    p = write(tmp_path, 'name = "t1"\ntime_limit = 12\nseed = 7\n[broker]\ntruncation = "hw"\n'
                        'min_insync_replicas = 1\n[client]\nacks = 1\n[nemesis]\nfaults = ["pause"]\ninterval = 2\n')
    cfg = C.build(p, {"acks": "all", "nodes": None, "nemesis": "kill,partition", "time_limit": "20"})
    assert cfg.name == "t1"
    assert cfg.seed == 7
    assert cfg.broker.truncation == "hw"
    assert cfg.broker.min_insync_replicas == 1
    assert cfg.client.acks == "all"            # flag wins
    assert cfg.nemesis.faults == ["kill", "partition"]
    assert cfg.nemesis.interval == 2.0
    assert cfg.time_limit == 20.0
    assert cfg.cluster.nodes == 3              # not given anywhere: default


@pytest.mark.parametrize("text, message", [
    # the message gained "did you mean" (rundir/settings.py)
    pytest.param('name = "x"\n\n[broker]\ntruncation = "hw"\nflsh = "never"\n',
                 "{p}:5: unknown key 'broker.flsh' (did you mean 'broker.flush'?)",
                 id="unknown_key_names_file_key_and_line"),
    pytest.param('[brokers]\nx = 1\n', "{p}: unknown key 'brokers' (did you mean 'broker'?)", id="unknown_section"),
    pytest.param('[cluster]\nnodes = "three"\n', "{p}:2: key 'cluster.nodes' must be an integer, got 'three'",
                 id="bad_value_type"),
    pytest.param('[broker]\n\ntruncation = "epoch"\n',
                 "{p}:3: key 'broker.truncation' must be one of hw, leader-epoch, got 'epoch'", id="bad_enum_value"),
])
def test_a_bad_key_or_value_names_the_file_line_and_key(tmp_path, text, message):
    p = write(tmp_path, text)
    with pytest.raises(C.ConfigError) as e:
        C.build(p)
    assert str(e.value) == message.format(p=p)


def test_bad_acks_and_fault(tmp_path):
    with pytest.raises(C.ConfigError) as e:
        C.build(write(tmp_path, '[client]\nacks = 2\n'))
    assert "key 'client.acks' must be 0, 1 or \"all\", got 2" in str(e.value)
    with pytest.raises(C.ConfigError) as e:
        C.build(None, {"nemesis": "kill,explode"})
    assert str(e.value).startswith("--nemesis: unknown fault 'explode'")
    with pytest.raises(C.ConfigError) as e:
        C.build(None, {"nemesis": "mix,kill"})
    assert str(e.value) == ("--nemesis: 'mix' is the whole rotating mix: name it alone, or "
                            "name the faults (got mix, kill)")


def test_cross_field_checks(tmp_path):
    with pytest.raises(C.ConfigError) as e:
        C.build(write(tmp_path, '[cluster]\nnodes = 2\n[topic]\nreplication_factor = 3\n'))
    assert "key 'topic.replication_factor' must be between 1 and the number of nodes (2), got 3" in str(e.value)
    with pytest.raises(C.ConfigError) as e:
        C.build(None, {"min_insync_replicas": 4})
    assert str(e.value) == ("--min-insync-replicas: key 'broker.min_insync_replicas' must be between 1 and the "
                            "replication factor (3), got 4")
    assert C.build(None, {"nemesis": "power-loss"}).broker_settings()["power_loss"] is True
    assert C.build(None, {"nemesis": "aimed"}).broker_settings()["power_loss"] is True      # a package's power cut
    assert C.build(None, {"nemesis": "kill,partition"}).broker_settings()["power_loss"] is False


def test_invalid_toml_and_missing_file(tmp_path):
    with pytest.raises(C.ConfigError) as e:
        C.build(write(tmp_path, 'name = \n'))
    assert str(e.value).startswith(f"{tmp_path / 't.toml'}: not valid TOML")
    with pytest.raises(C.ConfigError) as e:
        C.build(tmp_path / "nope.toml")
    assert str(e.value).startswith(f"{tmp_path / 'nope.toml'}: cannot read test file")


def test_settings_for_the_cluster_and_round_trip():
    cfg = C.build(None, {"truncation": "hw", "flush": "never", "power_loss": True, "unclean_election": True})
    b = cfg.broker_settings()
    assert (b["truncation"], b["flush"], b["power_loss"], b["min_insync_replicas"]) == ("hw", "never", True, 2)
    c = cfg.controller_settings()
    assert c["unclean_leader_election"] is True
    assert c["topics"] == [{"name": "hw", "partitions": 3, "replication_factor": 3}]
    again = C.from_dict(cfg.to_dict())
    assert again == cfg


def test_topic_configs_reach_controller_json_and_a_bad_one_names_file_line_and_key(tmp_path):
    cfg = C.build(write(tmp_path, '[topic]\nname = "stamped"\nconfigs = {"message.timestamp.type" = "LogAppendTime"}\n'))
    assert cfg.controller_settings()["topics"] == [{"name": "stamped", "partitions": 3, "replication_factor": 3,
                                                    "configs": {"message.timestamp.type": "LogAppendTime"}}]
    assert C.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(C.ConfigError) as e:
        C.build(write(tmp_path, '[topic]\nname = "x"\nconfigs = {"retention.ms" = "1"}\n'))
    assert str(e.value) == (f"{tmp_path / 't.toml'}:3: key 'topic.configs' unsupported topic config "
                            "'retention.ms' (supported: message.timestamp.type)")
    with pytest.raises(C.ConfigError) as e:
        C.build(write(tmp_path, '[topic]\nconfigs = {"message.timestamp.type" = "Now"}\n'))
    assert str(e.value).endswith(":2: key 'topic.configs' message.timestamp.type must be one of CreateTime, "
                                 "LogAppendTime, got 'Now'")


def test_with_values_copies_and_checks_each_dotted_key():
    from harness.config import TestConfig, with_values
    base = TestConfig()
    unsafe = with_values(base, {"broker.truncation": "hw", "client.acks": "-1", "broker.min_insync_replicas": 1})
    assert (unsafe.broker.truncation, unsafe.client.acks, unsafe.broker.min_insync_replicas) == ("hw", "all", 1)
    assert (base.broker.truncation, base.broker.min_insync_replicas) == ("leader-epoch", 2)   # not changed
    with pytest.raises(KeyError):
        with_values(base, {"broker.truncaton": "hw"})
    with pytest.raises(ValueError, match="must be 0, 1 or \"all\""):
        with_values(base, {"client.acks": 2})


def test_idempotence_needs_the_kafka_client_and_acks_all(tmp_path):
    cfg = C.build(None, {"client": "kafka", "idempotence": True})
    assert cfg.client.idempotence is True and cfg.recorded()["client"]["idempotence"] is True
    with pytest.raises(C.ConfigError, match=r"^--idempotence: key 'client.idempotence' needs client.kind = "
                                            r"\"kafka\" .* got 'mixed'$"):
        C.build(None, {"idempotence": True})
    p = write(tmp_path, '[client]\nkind = "kafka"\nacks = 1\nidempotence = true\n')
    with pytest.raises(C.ConfigError, match=r"t.toml:4: key 'client.idempotence' needs client.acks = \"all\""):
        C.build(p)
