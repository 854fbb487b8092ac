"""The anomaly kinds are declared once (rundir/kinds.py): the contract, the policy, the totals, both
engines and the report agree with the registry."""
from __future__ import annotations

import pytest

from rundir import formats as rf
from rundir import kinds
from checkers import ingest, policy, protocol_trace, reference, totals
from simulated_runs import RunBuilder
from reports import anomalies as report_anomalies
import checker_scenarios as sc


def test_registry_is_the_contract_the_policy_and_the_totals():
    assert len(set(kinds.NAMES)) == len(kinds.KINDS)
    assert rf.ANOMALY_KINDS == kinds.NAMES
    assert set(kinds.BY_NAME) == set(kinds.NAMES)
    assert policy.DEFAULT_ALLOWED == tuple(k.name for k in kinds.KINDS if not k.fails_by_default)
    assert policy.failing_kinds({}) == [k.name for k in kinds.KINDS if k.fails_by_default]
    assert totals.TIMED_KINDS == tuple(k.name for k in kinds.KINDS if k.timed)
    for k in kinds.KINDS:
        assert k.summary and "\n" not in k.summary, k.name
        assert k.explanation, k.name
        assert k.example_fields[0] == "partition", k.name
        assert k.replicas is None or k.replicas in kinds.REPLICAS_SHOWING, k.name
        assert ("replicas" in k.example_fields) == (k.replicas is not None), k.name


def test_report_explains_every_registered_kind():
    shown = {a.kind: a for a in report_anomalies.anomaly_kinds(None)}
    assert list(shown) == list(kinds.NAMES)
    for k in kinds.KINDS:
        assert shown[k.name].explanation == k.explanation


@pytest.mark.spark
def test_every_registered_kind_has_one_spark_family():
    """The families of engine.FAMILIES build their examples with `examples(top, details)`; the protocol
    family runs apart (its rules build their own examples): together they own every kind once."""
    from checkers.anomalies import engine, protocol

    owned = [k.name for family in engine.FAMILIES for k in family.KINDS] + list(protocol.KINDS)
    assert sorted(owned) == sorted(kinds.NAMES)   # each kind exactly once
    for family in engine.FAMILIES:
        for k in family.KINDS:
            assert family.__name__ == f"checkers.anomalies.{k.family}", k.name
        assert callable(family.examples)
    assert protocol not in engine.FAMILIES
    assert tuple(protocol.KINDS) == kinds.PROTOCOL_NAMES
    for name in protocol.KINDS:
        assert protocol.__name__ == f"checkers.anomalies.{kinds.BY_NAME[name].family}", name
    assert callable(protocol.analyze)


def _columnar(tmp_path):
    """A run with every scenario (one partition each), ingested: its columnar tables' directory and the
    protocol rules' facts from its test.json (without them the engines find no protocol kind)."""
    b = RunBuilder()
    for p, s in enumerate(sc.SCENARIOS):
        s(b, p)
    b.write(tmp_path)
    return ingest.ingest(tmp_path).columnar_dir, protocol_trace.run_facts(tmp_path)


def assert_agrees_with_registry(findings: dict) -> None:
    """Every registered kind is in the engine's output (and nothing else); every example carries exactly
    its kind's fields, in order; a timed kind's findings all have a time, an untimed kind's none."""
    assert set(findings["anomalies"]) == set(kinds.NAMES)
    for k in kinds.KINDS:
        a = findings["anomalies"][k.name]
        assert a["count"] > 0, f"the scenarios find no {k.name}: add one to tests/checkers/checker_scenarios.py"
        for e in a["examples"]:
            assert tuple(e) == k.example_fields, k.name
        assert a["histogram"]["untimed"] == (0 if k.timed else a["count"]), k.name


def test_reference_output_agrees_with_registry(tmp_path):
    col_dir, facts = _columnar(tmp_path)
    assert_agrees_with_registry(reference.analyze(col_dir, facts=facts))


@pytest.mark.spark
def test_spark_output_agrees_with_registry(tmp_path, spark):
    from checkers.anomalies import engine

    col_dir, facts = _columnar(tmp_path)
    assert_agrees_with_registry(engine.analyze(spark, col_dir, facts=facts))
