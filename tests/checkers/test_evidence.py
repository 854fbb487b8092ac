"""Evidence, versioned (rundir/evidence.py, checkers/coverage.py): what a run declares it holds decides what
is checked. Known answers: a run whose brokers wrote no `ack` lines is not judged by ack-undecided (and
says so), the same run declaring today's event types is; evidence out of the backend's scope is named
not applicable and leaves the verdict valid; evidence that should be there and is not makes it unknown,
naming the file; a malformed section is one error naming the field."""
from __future__ import annotations

import json
import shutil

import pytest

from broker.eventlog import EVENT_FIELDS, EVENT_NAMES
from broker.rules import EVENTS_READ, RULES
from broker.rules.evidence import RULE_EVENTS
from checkers.check import CheckOptions, check_run
from rundir import evidence as ev
from rundir import formats as rf
from rundir import kinds
from rundir.verdict import kind_names, scope_texts, verdict_line
from simulated_runs import RunBuilder
import checker_scenarios as sc

TODAY = ev.declare(EVENT_NAMES).as_json()          # what today's harness writes for the local backend


def _ack_undecided_run(tmp_path, **write):
    """A local run whose producer was told offset 2 succeeded with no leader's `ack` for it."""
    b = RunBuilder(backend="local", start_wall_ns=1_763_765_100_000_000_000)
    sc.ack_undecided(b, 0)
    return b.write(tmp_path / "run", **write)


def _without_ack_lines(run_dir):
    """The same run as brokers before 2026-11-27 logged it: no `ack` lines."""
    for log in (run_dir / rf.NODES_DIR).glob("*/broker.log"):
        log.write_text("".join(line for line in log.read_text().splitlines(keepends=True)
                               if '"event":"ack"' not in line.replace(" ", "")))


@pytest.mark.parametrize("engine", ["reference", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_run_of_a_format_without_ack_lines_is_not_judged_by_ack_undecided(tmp_path, engine, request):
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    run = _ack_undecided_run(tmp_path)
    _without_ack_lines(run)
    res = check_run(run, CheckOptions(engine=engine, spark=spark))
    a = res["anomalies"]["ack-undecided"]
    assert (res["valid"], a["count"], a["status"], res["unknown_reasons"]) == (True, 0, "not-checked", [])
    why = "the run's event logs, of a format written before formats were declared, hold no `ack` lines"
    assert a["status_reason"] == why
    present = {"leader-change", "role", "hw-change"}                # what the run's logs hold
    lacking_ack = [k for k in RULES if RULE_EVENTS[k] - present == {"ack"}]
    assert "ack-undecided" in lacking_ack and "ack-above-hw" in lacking_ack
    assert {"evidence": "event-logs", "reason": why, "kinds": lacking_ack} in res["scope"]["not_checked"]
    # the rules whose evidence the run holds are still checked
    assert res["anomalies"]["leader-not-elected"]["status"] == "checked"
    # the verdict line says it once for every rule the format cannot feed (results.json has each reason)
    assert "not checked (the run's format lacks the event lines they need; results.json scope): " in verdict_line(res)


@pytest.mark.parametrize("engine", ["reference", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_run_declaring_ack_lines_is_judged_by_ack_undecided(tmp_path, engine, request):
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    run = _ack_undecided_run(tmp_path, evidence=TODAY)
    res = check_run(run, CheckOptions(engine=engine, spark=spark))
    assert res["valid"] is False and res["failed_kinds"] == ["ack-undecided"]
    assert res["anomalies"]["ack-undecided"]["status"] == "checked"
    assert res["scope"] == {"not_applicable": [], "not_checked": [], "missing": []}
    # and without the lines its brokers declare they write, the rule finds what it must (nothing excuses it)
    _without_ack_lines(run)
    res = check_run(run, CheckOptions(engine=engine, spark=spark))
    assert res["anomalies"]["ack-undecided"]["count"] == 3 and res["valid"] is False


def test_a_declared_format_without_a_rule_s_event_type_names_it(tmp_path):
    types = sorted(set(EVENT_NAMES) - {"ack"})
    run = _ack_undecided_run(tmp_path, evidence={"formats": {"history": 1, "replica-dumps": 1, "event-logs": 1},
                                                 "event_types": types, "absent": {}})
    res = check_run(run, CheckOptions(engine="reference"))
    a = res["anomalies"]["ack-undecided"]
    assert (res["valid"], a["count"], a["status"]) == (True, 0, "not-checked")
    assert a["status_reason"] == "the run's brokers write no `ack` lines (event-log format 1)"


def test_another_tool_s_run_declares_what_it_holds_and_gets_a_verdict_over_it(tmp_path):
    """A history translated from another harness, with replica dumps and no event logs of ours."""
    run = _ack_undecided_run(tmp_path, evidence={
        "formats": {"history": 1, "replica-dumps": 1},
        "absent": {"event-logs": "translated from another harness: no broker event logs"}})
    shutil.rmtree(run / rf.NODES_DIR)
    res = check_run(run, CheckOptions(engine="reference"))
    assert res["valid"] is True and res["unknown_reasons"] == []
    assert res["scope"]["not_applicable"] == [{"evidence": "event-logs", "kinds": list(kinds.PROTOCOL_NAMES),
                                               "reason": "translated from another harness: no broker event logs"}]
    assert res["anomalies"]["divergence"]["status"] == res["anomalies"]["lost-write"]["status"] == "checked"
    assert scope_texts(res) == ["not applicable (translated from another harness: no broker event logs): "
                                "the 21 protocol rules"]


@pytest.mark.parametrize("keyed", [False, True])
def test_the_keys_family_applies_to_keyed_sends_only(tmp_path, keyed):
    """A history whose sends carry no key cannot show a key's order: key-reorder is not exercised (its
    status says why, the scope and the verdict line leave it out: the run never set out to check it);
    with keyed sends it is checked (and finds the scenario's reorder)."""
    b = RunBuilder()
    (sc.key_reorder if keyed else sc.clean)(b, 0)
    b.write(tmp_path)
    res = check_run(tmp_path, CheckOptions(engine="reference"))
    a = res["anomalies"][kinds.KEY_REORDER.name]
    if keyed:
        assert a["status"] == "checked" and a["count"] == 1 and res["valid"] is False
        assert res["scope"]["not_applicable"] == []
    else:
        assert a["status"] == "not-exercised" and a["status_reason"] == kinds.KEY_REORDER.needs.missing and a["count"] == 0
        assert res["valid"] is True and res["scope"]["not_applicable"] == []
        assert not any(kinds.KEY_REORDER.name in g["kinds"] for gs in res["scope"].values() for g in gs)
        assert "key-reorder" not in verdict_line(res)


def test_evidence_that_should_be_there_and_is_not_makes_the_verdict_unknown(tmp_path):
    run = _ack_undecided_run(tmp_path, evidence=TODAY, nodes=["c0", "n1", "n2"])
    res = check_run(run, CheckOptions(engine="reference"))
    # n2 is listed in the cluster and left no event log: unknown, naming the file; what the other logs
    # show is still found (those findings are real)
    assert res["valid"] is False and res["anomalies"]["ack-undecided"]["count"] == 1
    assert {"file": "nodes/n2/broker.log", "line": None, "partition": None,
            "reason": "event log is missing (test.json's cluster lists node n2): the protocol rules not checked"} \
        in res["unknown_reasons"]
    assert res["anomalies"]["ack-undecided"]["status"] == "missing"
    # a replica dump directory missing from a backend that makes them: unknown, never out of scope
    run2 = _ack_undecided_run(tmp_path / "2", evidence=TODAY)
    shutil.rmtree(run2 / rf.REPLICAS_DIR)
    res = check_run(run2, CheckOptions(engine="reference", allow=["ack-undecided"]))
    assert res["valid"] == "unknown" and res["anomalies"]["divergence"]["status"] == "missing"
    assert [r["file"] for r in res["unknown_reasons"]] == ["replicas/"]
    assert res["scope"]["missing"][0]["kinds"] == ["divergence"]


def _record_collected(run_dir):
    """test.json's evidence with the sizes of the run's files now, as the harness records them."""
    doc = rf.load_json(run_dir / rf.TEST_JSON)
    doc["evidence"]["collected"] = ev.collected_files(run_dir)
    (run_dir / rf.TEST_JSON).write_text(json.dumps(doc))
    return doc["evidence"]["collected"]


@pytest.mark.parametrize("engine", ["reference", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_collected_file_cut_short_or_changed_makes_its_families_unknown(tmp_path, engine, request):
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    run = _ack_undecided_run(tmp_path, evidence=TODAY)
    collected = _record_collected(run)
    assert "nodes/n1/broker.log" in collected and "replicas/n1/p0.jsonl" in collected
    res = check_run(run, CheckOptions(engine=engine, spark=spark))
    assert (res["failed_kinds"], res["unknown_reasons"]) == (["ack-undecided"], [])
    # n1's log loses its last 40 bytes (a copy that did not finish): not the whole log, so the rules are
    # unknown, naming the file; the history's families are still checked
    log = run / "nodes" / "n1" / "broker.log"
    data = log.read_bytes()
    log.write_bytes(data[:-40])
    res = check_run(run, CheckOptions(engine=engine, spark=spark))
    assert res["unknown_reasons"] == [{
        "file": "nodes/n1/broker.log", "line": None, "partition": None,
        "reason": f"file cut short: {len(data) - 40:,} of the {len(data):,} bytes the harness collected "
                  f"(test.json evidence.collected): not checked"}]
    assert res["anomalies"]["ack-undecided"]["status"] == "missing"
    assert res["anomalies"]["lost-write"]["status"] == res["anomalies"]["divergence"]["status"] == "checked"
    log.write_bytes(data)
    # a dump that grew after the run, and one that is gone: divergence unknown, both named
    dump = run / "replicas" / "n2" / "p0.jsonl"
    dump.write_bytes(dump.read_bytes() + b"\n")
    (run / "replicas" / "n3" / "p0.jsonl").unlink()
    res = check_run(run, CheckOptions(engine=engine, spark=spark, allow=["ack-undecided"]))
    assert res["valid"] == "unknown" and res["anomalies"]["divergence"]["status"] == "missing"
    reasons = {r["file"]: r["reason"] for r in res["unknown_reasons"]}
    size = collected["replicas/n2/p0.jsonl"]
    assert reasons["replicas/n2/p0.jsonl"] == (f"file changed after the run: {size + 1:,} bytes, the harness "
                                               f"collected {size:,} (test.json evidence.collected): not checked")
    assert "replicas/n3/p0.jsonl" in reasons
    assert res["anomalies"]["ack-undecided"]["status"] == "checked"


@pytest.mark.parametrize("section,error", [
    ([], "field 'evidence' must be an object"),
    ({"formats": {"history": "1"}}, "field 'evidence.formats.history' must be a format version (an integer >= 0)"),
    ({"formats": {"histroy": 1}}, "field 'evidence.formats': unknown evidence 'histroy' (known: history, "
                                  "replica-dumps, event-logs)"),
    ({"formats": {"history": 99}}, "field 'evidence.formats.history': format 99 is newer than this checker reads "
                                   "(up to 1): upgrade highwater"),
    ({"formats": {"history": 1, "event-logs": 1}}, "field 'evidence.event_types' is missing: which event types "
                                                    "do the event logs hold?"),
    ({"formats": {"history": 1}, "absent": {"history": "x"}}, "field 'evidence': 'history' is both in 'formats' and "
                                                             "in 'absent'"),
    ({"formats": {"history": 1}, "absent": {"replica-dumps": ""}}, "field 'evidence.absent' must map evidence names "
                                                                   "to why each is absent"),
    ({"formats": {"history": 1}, "collected": []}, "field 'evidence.collected' must map file paths to their sizes "
                                                   "in bytes"),
    ({"formats": {"history": 1}, "collected": {"history.jsonl": 5}}, "field 'evidence.collected': 'history.jsonl' "
                                                                    "is neither an event log nor a replica dump "
                                                                    "(nodes/*/broker.log, replicas/*/p*.jsonl)"),
    ({"formats": {"history": 1}, "collected": {"nodes/n1/broker.log": -1}},
     "field 'evidence.collected.nodes/n1/broker.log' must be a size in bytes (an integer >= 0)"),
])
def test_a_malformed_evidence_section_is_one_error_naming_the_field(tmp_path, section, error):
    run = _ack_undecided_run(tmp_path, evidence=section)
    with pytest.raises(rf.FormatError) as e:
        check_run(run, CheckOptions(engine="reference"))
    assert str(e.value) == f"{run / rf.TEST_JSON}: {error}"


def test_declare_writes_what_parse_reads():
    doc = ev.declare({"ack", "role"}, {ev.REPLICA_DUMPS: "no disks"}).as_json()
    assert doc == {"formats": {"history": 1, "event-logs": 1}, "absent": {"replica-dumps": "no disks"},
                   "event_types": ["ack", "role"]}
    back = ev.parse({"evidence": doc})
    assert (back.declared, back.event_types, back.absent) == (True, frozenset({"ack", "role"}), {"replica-dumps": "no disks"})
    sized = back.with_collected({"nodes/n1/broker.log": 7})
    assert ev.parse({"evidence": sized.as_json()}).collected == {"nodes/n1/broker.log": 7} and back.collected == {}
    with pytest.raises(ValueError, match="unknown evidence"):
        ev.declare(set(), {"disks": "x"})
    # undeclared: an external run of before the section had its reason in cluster.no_replica_dumps
    old = ev.parse({"cluster": {"backend": "external", "no_replica_dumps": "no access"}})
    assert (old.declared, sorted(old.absent)) == (False, ["event-logs", "replica-dumps"])


def test_every_rule_names_event_types_the_adapters_keep():
    assert set(RULE_EVENTS) == set(RULES)
    used = set().union(*RULE_EVENTS.values())
    events = {n.partition(".")[0] for n in used}
    assert events <= EVENTS_READ, events - EVENTS_READ
    assert EVENTS_READ <= set(EVENT_NAMES)
    # a field a rule needs is one its event carries (broker/eventlog.py)
    fields = {tuple(n.split(".")) for n in used if "." in n}
    assert fields == {("hw-change", "leo"), ("leader-change", "version")}
    assert all(f in EVENT_FIELDS[e] for e, f in fields)


def test_kind_names_speak_of_whole_families():
    assert kind_names(list(kinds.PROTOCOL_NAMES)) == "the 21 protocol rules"
    assert kind_names([k for k in kinds.PROTOCOL_NAMES if k != "read-uncommitted"]) == \
        "20 of 21 protocol rules (all but read-uncommitted)"
    assert kind_names(["divergence", "ack-undecided"]) == "divergence, ack-undecided"
