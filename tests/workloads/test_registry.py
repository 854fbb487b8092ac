"""The Workload protocol (workloads/workload.py): the registry, the [workload] settings declared once,
and what each workload records.

- every workload's settings are declared, and its name is a choice of `workload.name`;
- the test file's [workload] section and `highwater run`'s flags are built from the declarations: the
  defaults, the docs in the help, the checks a bad value meets (one line naming the key);
- each workload records exactly the history operations it declares (fake clients, a real history).
"""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.client import FetchResult, SendResult
from harness import config as config_mod
from rundir import formats as runformat
from rundir.history import History
from workloads.workload import FLAGS, KINDS, NAMES, SETTINGS, Run, Workload

REPO = Path(__file__).resolve().parents[2]


def test_every_workload_declares_what_it_reads_and_the_section_is_built_from_it():
    assert NAMES == tuple(KINDS) and config_mod.SCHEMA["workload.name"].choices == NAMES
    for kind in KINDS.values():
        assert kind.doc and kind.records and set(kind.settings) <= set(SETTINGS)
    section = config_mod.TestConfig().workload
    assert {k: getattr(section, k) for k in SETTINGS} == {k: s.default for k, s in SETTINGS.items()}
    for flag, key in FLAGS.items():
        declared, built = SETTINGS[key], config_mod.SCHEMA[f"workload.{key}"]
        assert config_mod.FLAG_KEYS[flag] == f"workload.{key}"
        assert (built.type, built.default, built.doc, built.choices, built.min, built.above) == \
            (declared.type, declared.default, declared.doc, declared.choices, declared.min, declared.above)


def test_the_run_flags_come_from_the_declarations():
    out = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--help"], capture_output=True, text=True,
                         cwd=REPO, timeout=60, env={"PYTHONPATH": str(REPO), "COLUMNS": "200"}).stdout
    options = " ".join(out.split()).split(" --")           # one entry per option, its help unwrapped
    for flag, key in FLAGS.items():
        s = SETTINGS[key]
        text = next(o for o in options if o.startswith(f"{flag} "))
        assert s.doc in text and f"[{s.default}]" in text, text


@pytest.mark.parametrize("flag, value, problem", [
    ("concurrency", "0", "key 'workload.concurrency' must be at least 1, got 0"),
    ("rate", "fast", "--rate: must be a number, got 'fast'"),
    ("workload", "queue", "key 'workload.name'"),
])
def test_a_bad_workload_flag_is_one_line_naming_the_key(flag, value, problem):
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", f"--{flag}", value, "--nemesis", "none"],
                       capture_output=True, text=True, cwd=REPO, timeout=60, env={"PYTHONPATH": str(REPO)})
    assert r.returncode == 254 and problem in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


class Fake:
    def __init__(self):
        self.n = 0

    def send(self, topic, partition, values):
        self.n += 1
        return SendResult([self.n], 0)

    def fetch(self, topic, partition, offset, max_records=1000, max_wait_ms=0):
        return FetchResult([], 0, 0)

    def close(self):
        pass


# the group workload needs a group client factory and its own settings: the same check for it is
# tests/workloads/test_group_worker.py test_the_group_workload_records_what_it_declares
@pytest.mark.parametrize("name", sorted(k for k in KINDS if k != "group"))
def test_a_workload_records_what_it_declares(tmp_path, name):
    h = History(tmp_path / "h.jsonl")
    wl = Workload(name, Run(h, "hw", 3, 1, make_producer=lambda i: Fake(), make_consumer=lambda i: Fake()),
                  SimpleNamespace(rate=200.0, concurrency=2, consumers=2, keys=5))
    wl.start()
    threading.Event().wait(0.4)
    assert wl.stop() == [] and wl.errors() == []
    h.close()
    fs = {line.obj["f"] for line in runformat.iter_jsonl(tmp_path / "h.jsonl")}
    assert fs == set(KINDS[name].records)


def test_the_keyed_workload_sends_each_key_to_one_partition_and_records_it(tmp_path):
    h = History(tmp_path / "h.jsonl")
    wl = Workload("keyed", Run(h, "hw", 3, 7, make_producer=lambda i: Fake()),
                  SimpleNamespace(rate=500.0, concurrency=2, keys=5))
    wl.start()
    threading.Event().wait(0.4)
    assert wl.stop() == [] and wl.errors() == []
    h.close()
    sends = [line.obj for line in runformat.iter_jsonl(tmp_path / "h.jsonl")]
    assert len(sends) > 20
    assert {tuple(op["value"]) for op in sends} == {("partition", "key", "value"),
                                                    ("partition", "key", "value", "offset", "epoch")}
    assert all(op["value"]["partition"] == op["value"]["key"] % 3 for op in sends)
    assert {op["value"]["key"] for op in sends} == set(range(5))
    # the other workloads record no key
    h2 = History(tmp_path / "h2.jsonl")
    wl = Workload("producer", Run(h2, "hw", 3, 7, make_producer=lambda i: Fake()),
                  SimpleNamespace(rate=500.0, concurrency=1))
    wl.start()
    threading.Event().wait(0.2)
    wl.stop()
    h2.close()
    assert not any("key" in line.obj["value"] for line in runformat.iter_jsonl(tmp_path / "h2.jsonl"))
