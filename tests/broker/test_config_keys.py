"""Every broker and controller setting is declared once (broker/config_keys.py) and everything that
names one is made from that declaration: the config files' classes, the replication state machine's,
the simulator's, the harness's [broker] section and flags, the explore options, and the docs' tables."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from broker.config import BrokerConfig, validate_broker_config
from broker.config_keys import (BY_NAME, KEYS, docs_table, keys_of, parse_acks, rewrite_docs, sim_keys, section_keys,
                                wire_acks)
from broker.controller.config import ControllerConfig
from broker.errors import ConfigError
from broker.replication.config import ReplicationConfig

REPO = Path(__file__).resolve().parents[2]


def _defaults(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def test_the_config_files_have_exactly_their_keys_with_the_declared_defaults():
    for cls, file in ((BrokerConfig, "broker"), (ControllerConfig, "controller")):
        keys = keys_of(file)
        assert [f.name for f in dataclasses.fields(cls)] == [k.name for k in keys if k.setting.required] + \
            [k.name for k in keys if not k.setting.required]
        assert _defaults(cls) == {k.name: k.default for k in keys if not k.setting.required}
    # a key both files hold is one declaration with one default
    both = {k.name for k in KEYS if set(k.files) == {"broker", "controller"}}
    assert {"host", "port", "data_dir", "log_file", "min_insync_replicas", "eligible_leader_replicas"} == both


def test_the_replication_config_is_the_keys_marked_replication():
    assert _defaults(ReplicationConfig) == {k.replication: k.default for k in KEYS if k.replication}
    broker = validate_broker_config({"node_id": 1, "host": "h", "port": 1, "controller_host": "c",
                                     "controller_port": 2, "data_dir": "d", "log_file": "l",
                                     "eligible_leader_replicas": True, "truncation": "hw"}, "b.json")
    rc = ReplicationConfig.from_broker_config(broker)
    assert (rc.truncation, rc.strict_min_isr_hw, rc.min_insync_replicas) == ("hw", True, 1)
    assert ReplicationConfig(truncation="kip-101").truncation == "kip-101"     # the demonstration mode
    with pytest.raises(ValueError, match="replication config: truncation must be one of hw, leader-epoch, kip-101"):
        ReplicationConfig(truncation="none")
    with pytest.raises(ValueError, match="replication config: replica_fetch_max_records must be at least 1, got 0"):
        ReplicationConfig(replica_fetch_max_records=0)


def test_the_harness_broker_section_and_flags_are_the_keys_marked_test():
    from harness import config as hc
    cfg = hc.TestConfig()
    assert [f.name for f in dataclasses.fields(hc.BrokerConfig)] == [k.test for k in section_keys()] + ["extra"]
    for k in section_keys():
        assert getattr(cfg.broker, k.test) == k.run_default, k.name
        assert hc.SCHEMA[f"broker.{k.test}"].doc == k.setting.doc
    # one default each, except the two a test run changes on purpose (docs/running.md says why)
    assert {k.name for k in section_keys() if k.run_default != k.default} == {"min_insync_replicas",
                                                                           "replica_fetch_max_records"}
    # every broker.json / controller.json key of the section reaches its file
    broker, controller = cfg.broker_settings(), cfg.controller_settings()
    for k in section_keys():
        where = [f for f, d in (("broker", broker), ("controller", controller)) if k.name in d]
        assert where == list(k.files), k.name
    assert {f: d for f, d in hc.FLAG_KEYS.items() if d.startswith("broker.")} == \
        {k.flag.replace("-", "_"): f"broker.{k.test}" for k in section_keys() if k.flag}


def test_a_run_flag_goes_through_the_declared_check():
    from harness import config as hc
    with pytest.raises(ConfigError, match=r"^--min-insync-replicas: key 'broker.min_insync_replicas' must be "
                                          r"at least 1, got 0$"):
        hc.build(flags={"min_insync_replicas": "0"})
    with pytest.raises(ConfigError, match=r"^--min-insync-replicas: key 'broker.min_insync_replicas' must be "
                                          r"between 1 and the replication factor \(3\), got 4$"):
        hc.build(flags={"min_insync_replicas": "4"})
    with pytest.raises(ConfigError, match=r"^--truncation: key 'broker.truncation' must be one of hw, leader-epoch, "
                                          r"got 'kip-101'$"):
        hc.build(flags={"truncation": "kip-101"})
    assert hc.build(flags={"fetch_fencing": False, "min_insync_replicas": "1"}).broker.fetch_fencing is False


def test_the_simulator_and_explore_options_are_the_keys_marked_sim():
    from harness.exploration import OPTIONS, parse_options, sim_settings
    from simulator.world import SimSettings
    names = {f.name for f in dataclasses.fields(SimSettings)}
    assert {k.sim_name for k in sim_keys()} <= names
    assert {k.option for k in sim_keys() if k.flag} <= set(OPTIONS)
    assert OPTIONS["flush"].choices == ("always", "never")       # what the simulator models of the policy
    opts = parse_options({"unclean_election": True, "min_insync_replicas": 1, "acks": -1})
    s = sim_settings(opts)
    assert (s.unclean_leader_election, s.min_insync_replicas, s.acks, s.replica_fetch_max_records) == (True, 1, "all", 2)
    for k in sim_keys():
        if k.flag:
            assert getattr(s, k.sim_name) == getattr(opts, k.option), k.name


@pytest.mark.parametrize("raw, spelled", [("all", "all"), ("ALL", "all"), (-1, "all"), ("-1", "all"), (0, 0),
                                          ("1", 1), (1, 1)])
def test_acks_has_one_spelling(raw, spelled):
    assert parse_acks(raw) == spelled
    assert wire_acks(raw) == (-1 if spelled == "all" else spelled)


@pytest.mark.parametrize("raw", [2, "two", True, None, 1.0])
def test_bad_acks_are_refused(raw):
    with pytest.raises(ValueError, match="must be 0, 1 or \"all\""):
        parse_acks(raw)


def test_the_docs_tables_are_the_declared_keys():
    for doc in ("docs/architecture.md", "docs/running.md"):
        text = (REPO / doc).read_text()
        assert rewrite_docs(text) == text, f"{doc} is stale: run python -m broker.config_keys {doc}"
    arch = (REPO / "docs/architecture.md").read_text()
    assert docs_table("broker.json") in arch and docs_table("controller.json") in arch
    assert docs_table("test") in (REPO / "docs/running.md").read_text()
    assert "| `segment_records` | 100000 |" in docs_table("broker.json")


def test_every_key_is_documented_and_named_once():
    assert len(BY_NAME) == len(KEYS)
    assert all(k.setting.doc for k in KEYS)
    assert len({k.test for k in section_keys()}) == len(section_keys())
    assert len({k.flag for k in KEYS if k.flag}) == len([k for k in KEYS if k.flag])


def test_a_key_marked_test_is_a_test_file_key_and_a_run_flag_that_reaches_broker_json(tmp_path):
    """segment_records was a broker.json key a test could set only through broker.extra; marking it
    `test` and `flag` in its declaration is all it took to make it a [broker] key and --segment-records."""
    from harness import config as hc
    toml = tmp_path / "t.toml"
    toml.write_text("[broker]\nsegment_records = 50\n")
    assert hc.build(toml).broker_settings()["segment_records"] == 50
    assert hc.build(flags={"segment_records": "7"}).broker_settings()["segment_records"] == 7
    with pytest.raises(ConfigError, match=r"^--segment-records: key 'broker.segment_records' must be at least 1, got 0$"):
        hc.build(flags={"segment_records": "0"})
    assert hc.TestConfig().broker_settings()["segment_records"] == BY_NAME["segment_records"].default
