"""The node event log (broker/eventlog.py): one flushed JSON object per line with ts, node, event."""
from __future__ import annotations

import json
import time

from broker.eventlog import EventLog


def test_lines_are_flushed_json_with_ts_node_event(tmp_path):
    path = tmp_path / "sub" / "broker.log"
    log = EventLog(path, "n3")
    before = time.time_ns()
    log.emit("truncate", partition=0, **{"from": 7, "to": 5, "why": "leader-epoch"})
    # flushed per line: readable before close
    first = json.loads(path.read_text().splitlines()[0])
    log.emit("isr-change", partition=1, isr=(1, 3), version=4)
    log.close()
    after = time.time_ns()
    lines = [json.loads(l) for l in path.read_text().splitlines()]
    assert before <= first["ts"] <= after
    assert {k: v for k, v in first.items() if k != "ts"} == {
        "node": "n3", "event": "truncate", "partition": 0, "from": 7, "to": 5, "why": "leader-epoch"}
    assert list(first)[:3] == ["ts", "node", "event"]
    assert {k: v for k, v in lines[1].items() if k != "ts"} == {
        "node": "n3", "event": "isr-change", "partition": 1, "isr": [1, 3], "version": 4}
    assert len(lines) == 2


def test_appends_across_reopen(tmp_path):
    path = tmp_path / "broker.log"
    EventLog(path, "n1").emit("start")
    log = EventLog(path, "n1")
    log.emit("stop", reason="SIGTERM")
    log.close()
    assert [json.loads(l)["event"] for l in path.read_text().splitlines()] == ["start", "stop"]


def test_event_names_registry_matches_source_and_docs():
    """broker/eventlog.EVENT_NAMES (what scenario asserts accept) is exactly what the broker and the
    controller emit, and docs/formats.md documents each one."""
    import re
    from pathlib import Path

    from broker.eventlog import EVENT_NAMES

    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r'(?:emit\(|"event": |ClassVar\[str\] = )"([a-z][a-z-]*)"')
    emitted = set()
    for path in (root / "broker").rglob("*.py"):
        emitted.update(pattern.findall(path.read_text()))
    assert emitted == set(EVENT_NAMES), (sorted(emitted - set(EVENT_NAMES)), sorted(set(EVENT_NAMES) - emitted))
    docs = (root / "docs" / "formats.md").read_text()
    documented = set(re.findall(r"^\| `([a-z][a-z-]*)` \|", docs, re.M))
    assert set(EVENT_NAMES) <= documented, sorted(set(EVENT_NAMES) - documented)


def test_event_fields_registry_covers_every_field_the_source_writes():
    """broker/eventlog.EVENT_FIELDS lists every keyword an `emit("name", ...)` call, a controller event dict
    or a replication event's fields() writes (scenario asserts refuse fields outside it)."""
    import ast
    from pathlib import Path

    from broker.eventlog import EVENT_FIELDS, EVENT_NAMES

    assert set(EVENT_FIELDS) == set(EVENT_NAMES)
    written: dict[str, set[str]] = {}
    root = Path(__file__).resolve().parents[2] / "broker"
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "emit" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                keys = {kw.arg for kw in node.keywords if kw.arg is not None}
                for kw in node.keywords:           # **{"from": ...}
                    if kw.arg is None and isinstance(kw.value, ast.Dict):
                        keys |= {k.value for k in kw.value.keys if isinstance(k, ast.Constant)}
                written.setdefault(node.args[0].value, set()).update(keys)
            elif isinstance(node, ast.Dict):
                consts = {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
                if isinstance(consts.get("event"), ast.Constant):
                    written.setdefault(consts["event"].value, set()).update(k for k in consts if k != "event")
            elif isinstance(node, ast.ClassDef):
                names = [st.value.value for st in node.body if isinstance(st, ast.AnnAssign)
                         and getattr(st.target, "id", None) == "name" and isinstance(st.value, ast.Constant)]
                for st in node.body:
                    if names and isinstance(st, ast.FunctionDef) and st.name == "fields":
                        for sub in ast.walk(st):
                            if isinstance(sub, ast.Dict):
                                written.setdefault(names[0], set()).update(
                                    k.value for k in sub.keys if isinstance(k, ast.Constant))
    missing = {name: sorted(keys - EVENT_FIELDS.get(name, frozenset())) for name, keys in written.items()
               if keys - EVENT_FIELDS.get(name, frozenset())}
    assert missing == {}
