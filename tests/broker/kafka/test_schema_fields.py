"""Our schema table (broker/kafka/schema.py) against Kafka's own message JSON schemas, version by version.

tests/broker/kafka/data/schema_fields.json holds the field lists derived from Kafka's JSON files by
scripts/kafka-schema-fields (the Kafka commit is recorded inside it). Any field missing, extra, out of
order, of another type, nullability, tag, default or flexibility fails, as does a version range of
versions.py the file does not cover (regenerate it after changing a range)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from broker.kafka import schema as S
from broker.kafka import versions as V

DATA = json.loads((Path(__file__).parent / "data" / "schema_fields.json").read_text())
MESSAGES = DATA["messages"]


def ours_for(name: str) -> S.Message:
    if name == "RequestHeader":
        return S.REQUEST_HEADER
    if name == "ResponseHeader":
        return S.RESPONSE_HEADER
    kind = "request" if name.endswith("Request") else "response"
    api_key = MESSAGES[name]["api_key"]
    return S.message(api_key, kind)


def our_fields(msg: S.Message, version: int) -> list[dict]:
    out = []

    def walk(fields, prefix):
        for f in fields:
            if not f.exists(version):
                continue
            entry = {"path": prefix + f.name, "type": f.type, "nullable": f.is_nullable(version),
                     "tag": f.tag if f.is_tagged(version) else None}
            if f.default is not S.NO_DEFAULT:
                entry["default"] = f.default
            if f.flexible != "inherit":
                entry["flexible_versions"] = f.flexible
            out.append(entry)
            walk(f.fields, entry["path"] + ".")

    walk(msg.fields, "")
    return out


def differences(msg: S.Message, expected: dict) -> list[str]:
    """Every way `msg` differs from Kafka's facts in `expected` (one message of the data file)."""
    out = []
    if msg.flexible != S.parse_versions(expected["flexible_versions"]):
        out.append(f"{msg.name}: flexibleVersions {msg.flexible}, Kafka {expected['flexible_versions']}")
    declared = [int(v) for v in expected["versions"]]
    if msg.valid != (min(declared), max(declared)):
        out.append(f"{msg.name}: declares versions {msg.valid}, the data file {min(declared)}-{max(declared)}")
    for v, kafka_fields in expected["versions"].items():
        kafka_fields = [dict(f, flexible_versions=S.parse_versions(f["flexible_versions"]))
                        if "flexible_versions" in f else f for f in kafka_fields]
        mine = our_fields(msg, int(v))
        if mine == kafka_fields:
            continue
        for i in range(max(len(mine), len(kafka_fields))):
            a = mine[i] if i < len(mine) else None
            b = kafka_fields[i] if i < len(kafka_fields) else None
            if a != b:
                out.append(f"{msg.name} v{v} field #{i}: ours {a}, Kafka {b}")
                break
    return out


def test_data_file_covers_every_advertised_and_declared_range():
    ranges = {**V.SUPPORTED, **V.SCHEMA_ONLY}
    assert {int(k): tuple(v) for k, v in DATA["ranges"].items()} == ranges, \
        "versions.py changed: regenerate tests/broker/kafka/data/schema_fields.json (scripts/kafka-schema-fields)"
    expected_names = {V.NAMES[k] + kind for k in ranges for kind in ("Request", "Response")}
    assert set(MESSAGES) == expected_names | {"RequestHeader", "ResponseHeader"}
    assert len(DATA["source"]["kafka_commit"]) == 40


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_our_schema_matches_kafka(name):
    assert differences(ours_for(name), MESSAGES[name]) == []


def test_field_list_helper_agrees():
    msg = S.message(V.FETCH, "request")
    assert [p for p, *_ in S.field_list(msg, 4)] == [f["path"] for f in MESSAGES["FetchRequest"]["versions"]["4"]]


def _replace_field(msg: S.Message, path: list[str], **changes) -> S.Message:
    def rec(fields, names):
        out = []
        for f in fields:
            if f.name == names[0]:
                f = dataclasses.replace(f, **changes) if len(names) == 1 else \
                    dataclasses.replace(f, fields=rec(f.fields, names[1:]))
            out.append(f)
        return tuple(out)
    return dataclasses.replace(msg, fields=rec(msg.fields, path))


def test_the_comparison_catches_each_kind_of_difference():
    name = "ProduceResponse"
    msg = ours_for(name)
    expected = MESSAGES[name]
    assert differences(msg, expected) == []
    part = ["Responses", "PartitionResponses"]
    broken = [
        _replace_field(msg, part + ["ErrorMessage"], nullable=None),                 # nullability
        _replace_field(msg, part + ["BaseOffset"], type="int32"),                    # type
        _replace_field(msg, part + ["LogStartOffset"], versions=(6, S.ANY)),         # versions
        _replace_field(msg, part + ["LogAppendTimeMs"], default=0),                  # default
        _replace_field(msg, ["ThrottleTimeMs"], tag=0, tagged=(0, S.ANY)),           # tagged
        dataclasses.replace(msg, fields=tuple(reversed(msg.fields))),                # order
        dataclasses.replace(msg, fields=msg.fields[:-1]),                            # missing
        dataclasses.replace(msg, flexible=(8, S.ANY)),                               # flexibility
    ]
    for b in broken:
        assert differences(b, expected), b
