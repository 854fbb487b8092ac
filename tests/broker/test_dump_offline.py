"""The offline replica dump, run as a real subprocess: exact JSON lines, read-only, bad input."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from broker.records import Record
from broker.storage import PartitionStore
from broker.storage.codec import encode_record
from real_processes import run_then_sigkill

REPO = Path(__file__).resolve().parents[2]


def run_dump(*args):
    return subprocess.run([sys.executable, "-m", "broker.storage.dump", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def lines(path: Path) -> list[dict]:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def meta(partition, log_start, leo, hw, epochs, torn):
    return {"kind": "meta", "node": "n1", "topic": "hw", "partition": partition, "log_start": log_start,
            "leo": leo, "hw": hw, "epochs": epochs, "torn_bytes": torn}


def rec(offset, epoch, value, key=None, ts=0, crc_ok=True):
    return {"kind": "record", "offset": offset, "epoch": epoch, "value": value, "key": key, "timestamp": ts,
            "crc_ok": crc_ok}


P0 = [Record(0, 0, b"17", None, 1763765100000), Record(1, 2, b"-3", b"k", 1763765100001),
      Record(2, 2, b"abc", None, 1763765100002), Record(3, 2, b"007", None, 5)]


def make_data_dir(data: Path) -> None:
    store = PartitionStore.open(data, "hw", 0, segment_records=3)
    store.log.append(P0)
    store.hw_checkpoint.write(2)
    store.epoch_checkpoint.write([(0, 0), (2, 1)])
    store.close()
    PartitionStore.open(data, "hw", 1).close()


def test_dump_exact_lines(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    make_data_dir(data)
    before = tree_digest(data)
    r = run_dump(data, "--out", out, "--node", "n1")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == f"broker dump: 2 replica(s) of n1 written to {out}\n"
    assert sorted(os.listdir(out)) == ["p0.jsonl", "p1.jsonl"]
    assert (out / "p0.jsonl").read_text().splitlines()[:2] == [
        '{"kind":"meta","node":"n1","topic":"hw","partition":0,"log_start":0,"leo":4,"hw":2,'
        '"epochs":[[0,0],[2,1]],"torn_bytes":0}',
        '{"kind":"record","offset":0,"epoch":0,"value":17,"key":null,"timestamp":1763765100000,"crc_ok":true}']
    assert lines(out / "p0.jsonl") == [
        meta(0, 0, 4, 2, [[0, 0], [2, 1]], 0),
        rec(0, 0, 17, ts=1763765100000), rec(1, 2, -3, "k", 1763765100001), rec(2, 2, "abc", ts=1763765100002),
        rec(3, 2, "007", ts=5)]
    assert lines(out / "p1.jsonl") == [meta(1, 0, 0, 0, [], 0)]
    assert tree_digest(data) == before


def test_dump_of_kafka_records_with_headers_and_tombstones(tmp_path):
    """Records as Kafka clients send them, stored through a real PartitionStore and reopened (the start-up
    scan reads version-2 records): a tombstone's value is null, headers are a list of pairs, and a record
    without headers has no headers field."""
    data, out = tmp_path / "data", tmp_path / "out"
    store = PartitionStore.open(data, "kt", 0)
    store.log.append([Record(0, 1, b"12", b"user-1", 1700000000000, (("trace", b"t-1"), ("none", None))),
                      Record(1, 1, None, b"user-1", 1700000000001), Record(2, 1, b"13", None, 1700000000002),
                      Record(3, 1, b"\xff", None, 7, (("bin", b"\x00"),))])
    store.close()
    reopened = PartitionStore.open(data, "kt", 0)
    assert reopened.log.leo() == 4 and reopened.log.read(1, 1)[0].value is None
    reopened.close()
    r = run_dump(data, "--out", out, "--node", "n2")
    assert (r.returncode, r.stderr) == (0, "")
    assert lines(out / "p0.jsonl")[1:] == [
        {**rec(0, 1, 12, "user-1", 1700000000000), "headers": [["trace", "t-1"], ["none", None]]},
        rec(1, 1, None, "user-1", 1700000000001), rec(2, 1, 13, ts=1700000000002),
        {**rec(3, 1, "\\xff", ts=7), "headers": [["bin", "\x00"]]}]


def test_dump_reports_torn_tail_without_cutting_it(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    make_data_dir(data)
    last = data / "hw-0" / "00000000000000000003.log"
    with open(last, "ab") as fh:
        fh.write(encode_record(Record(4, 2, b"4"))[:25])
    before = tree_digest(data)
    r = run_dump(data, "--out", out, "--node", "n1")
    assert r.returncode == 0, r.stderr
    assert lines(out / "p0.jsonl")[0] == meta(0, 0, 4, 2, [[0, 0], [2, 1]], 25)
    assert len(lines(out / "p0.jsonl")) == 5
    assert tree_digest(data) == before


def test_dump_shows_crc_failure_and_cuts_after_it(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    make_data_dir(data)
    first = data / "hw-0" / "00000000000000000000.log"
    sizes = [len(encode_record(r)) for r in P0]
    with open(first, "r+b") as fh:           # "abc" -> "abd" in record 2
        fh.seek(sizes[0] + sizes[1] + sizes[2] - 1)
        fh.write(b"d")
    r = run_dump(data, "--out", out, "--node", "n1")
    assert r.returncode == 0, r.stderr
    assert lines(out / "p0.jsonl") == [
        meta(0, 0, 2, 2, [[0, 0], [2, 1]], sizes[2] + sizes[3]),
        rec(0, 0, 17, ts=1763765100000), rec(1, 2, -3, "k", 1763765100001),
        rec(2, 2, "abd", ts=1763765100002, crc_ok=False)]


WRITER = """
import sys, time
from broker.records import Record
from broker.storage import PartitionStore
store = PartitionStore.open(sys.argv[1], "hw", 2, power_loss=True, flush_policy="never")
store.log.append([Record(o, 4, str(o).encode()) for o in range(3)])
store.log.flush()
store.hw_checkpoint.write(3)
store.log.append([Record(o, 4, str(o).encode()) for o in range(3, 5)])
print("ready", flush=True)
time.sleep(120)
"""


def test_dump_after_sigkill(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    assert run_then_sigkill(WRITER, str(data)) == "ready\n"
    r = run_dump(data, "--out", out, "--node", "n1")
    assert r.returncode == 0, r.stderr
    assert lines(out / "p2.jsonl") == [meta(2, 0, 3, 3, [], 0), rec(0, 4, 0), rec(1, 4, 1), rec(2, 4, 2)]


def test_bad_input_exits_2_with_one_line(tmp_path):
    missing = tmp_path / "nope"
    r = run_dump(missing, "--out", tmp_path / "out", "--node", "n1")
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"broker dump: {missing}: no such directory\n")

    plain = tmp_path / "plain"
    (plain / "hw-0").mkdir(parents=True)
    r = run_dump(plain, "--out", tmp_path / "out", "--node", "n1")
    assert (r.returncode, r.stderr) == (
        2, f"broker dump: {plain}: not a broker data directory (no highwater-storage.json)\n")

    data = tmp_path / "data"
    make_data_dir(data)
    (data / "hw-1" / "hw.checkpoint").write_text("highwater-hw-checkpoint 1\nten\n")
    r = run_dump(data, "--out", tmp_path / "out", "--node", "n1")
    assert (r.returncode, r.stderr) == (
        2, f"broker dump: {data / 'hw-1' / 'hw.checkpoint'}:2: high watermark must be a non-negative integer, "
           "got 'ten'\n")
    assert not (tmp_path / "out").exists()

    r = run_dump(data, "--node", "n1")
    assert (r.returncode, r.stderr) == (2, "broker dump: the following arguments are required: --out\n")


def test_python_m_broker_dump_is_the_same_tool(tmp_path):
    data = tmp_path / "data"
    make_data_dir(data)
    direct = run_dump(data, "--out", tmp_path / "a", "--node", "n1")
    via_broker = subprocess.run([sys.executable, "-m", "broker", "dump", str(data), "--out", str(tmp_path / "b"),
                                 "--node", "n1"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (direct.returncode, via_broker.returncode, via_broker.stderr) == (0, 0, "")
    for name in ("p0.jsonl", "p1.jsonl"):
        assert (tmp_path / "b" / name).read_text() == (tmp_path / "a" / name).read_text()
    missing = subprocess.run([sys.executable, "-m", "broker", "dump", str(tmp_path / "nope"), "--out",
                              str(tmp_path / "c"), "--node", "n1"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (missing.returncode, missing.stderr) == (2, f"broker dump: {tmp_path / 'nope'}: no such directory\n")
