"""The mutation benchmark's corpus (benchmarks/mutants/): every mutant applies to this checkout (its
snippet exactly once) and leaves a file that compiles; applying one touches only the copy it is given."""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("mutation_benchmark", ROOT / "benchmarks" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module      # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


mb = _load_benchmark()
CORPUS = mb.load_corpus()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_corpus_covers_every_area_and_promise():
    assert len(CORPUS) >= 24
    assert {m.area for m in CORPUS} == set(mb.AREAS)
    assert {m.rule for m in CORPUS} == set(mb.RULES)
    assert all(m.why.strip() and "\n" not in m.why for m in CORPUS)
    assert all(1 <= max(m.find.count("\n"), m.replace.count("\n")) + 1 <= 5 for m in CORPUS)


@pytest.mark.parametrize("mutant", CORPUS, ids=[m.name for m in CORPUS])
def test_mutant_applies_once_and_compiles(mutant, tmp_path):
    src = ROOT / mutant.file
    assert src.read_text().count(mutant.find) == 1, f"{mutant.name}: snippet not exactly once in {mutant.file}"
    copy = tmp_path / mutant.file
    copy.parent.mkdir(parents=True)
    shutil.copy2(src, copy)
    before = _digest(src)
    path = mb.apply_mutant(mutant, tmp_path)
    assert path == copy.resolve() or path == copy
    text = copy.read_text()
    assert mutant.replace in text and text != src.read_text()
    mb.compile_file(copy)
    assert _digest(src) == before                  # the working tree is untouched


def test_applying_touches_only_the_copy(tmp_path):
    files = sorted({m.file for m in CORPUS})
    before = {f: _digest(ROOT / f) for f in files}
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, tmp_path / f)
    copies = {f: _digest(tmp_path / f) for f in files}
    mutant = CORPUS[0]
    mb.apply_mutant(mutant, tmp_path)
    assert {f: _digest(ROOT / f) for f in files} == before
    changed = [f for f in files if _digest(tmp_path / f) != copies[f]]
    assert changed == [mutant.file]
    with pytest.raises(mb.MutantError, match="working tree"):
        mb.apply_mutant(mutant, ROOT)
    with pytest.raises(mb.MutantError, match="working tree"):
        mb.apply_mutant(mutant, ROOT / "broker")
    assert {f: _digest(ROOT / f) for f in files} == before


def test_snippet_must_occur_exactly_once(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\nx = 1\ny = 2\n")
    twice = mb.Mutant("twice", "m.py", "x = 1", "x = 2", "server", "fencing", "w")
    never = mb.Mutant("never", "m.py", "z = 3", "z = 4", "server", "fencing", "w")
    for m in (twice, never):
        with pytest.raises(mb.MutantError, match="exactly once"):
            mb.apply_mutant(m, tmp_path)
    assert (tmp_path / "m.py").read_text() == "x = 1\nx = 1\ny = 2\n"


def test_corpus_file_forms_and_validation(tmp_path):
    (tmp_path / "two.toml").write_text(
        '[[mutant]]\nname = "a-1"\narea = "storage"\nrule = "recovery-cut"\nwhy = "w"\nfile = "broker/x.py"\n'
        'find = "a"\nreplace = "b"\n\n'
        '[[mutant]]\nname = "a-2"\narea = "controller"\nrule = "epoch-bump"\nwhy = "w"\nfile = "broker/y.py"\n'
        "find = '''\n    p = 1'''\nreplace = '''\n    p = 2'''\n")
    loaded = mb.load_corpus(tmp_path)
    assert [m.name for m in loaded] == ["a-2", "a-1"]          # in area order
    assert loaded[0].find == "    p = 1" and loaded[0].module == "broker.y"
    (tmp_path / "bad.toml").write_text('name = "b"\narea = "gui"\nrule = "fencing"\nwhy = "w"\n'
                                       'file = "broker/x.py"\nfind = "a"\nreplace = "b"\n')
    with pytest.raises(mb.MutantError, match="area"):
        mb.load_corpus(tmp_path)


def test_runs_see_the_copy_first(tmp_path):
    env = mb.child_env(tmp_path)
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path)
    assert "PYTHONSAFEPATH" not in env


def _run_dir(path: Path, config: dict, logs: dict[str, list[dict]]) -> Path:
    import json

    path.mkdir(parents=True)
    (path / "test.json").write_text(json.dumps({"config": config}))
    for node, lines in logs.items():
        (path / "nodes" / node).mkdir(parents=True)
        (path / "nodes" / node / "broker.log").write_text(
            "".join(json.dumps(e) + "\n" for e in lines) + "torn {\"event\": \"truncate\"\n")
    return path


def _marked(tmp_path, extra: str, name: str = "m"):
    (tmp_path / "corpus").mkdir(parents=True)
    (tmp_path / "corpus" / "m.toml").write_text(
        f'name = "{name}"\narea = "replication"\nrule = "truncate-epoch-end"\nwhy = "w"\nfile = "broker/x.py"\n'
        'find = "a"\nreplace = "b"\n' + extra)
    return mb.load_corpus(tmp_path / "corpus")[0]


def test_a_mutants_code_path_is_told_from_the_event_logs_and_the_settings(tmp_path):
    """Known answers of the path markers that explain an escape: `reached` counts the matching event-log
    lines of every node (exact field values), `needs` compares dotted test.json settings first."""
    m = _marked(tmp_path, 'reached = {event = "truncate", why = "offset-out-of-range"}\n'
                          'needs = {"broker.truncation" = "leader-epoch"}\n')
    assert m.reached == (("event", "truncate"), ("why", "offset-out-of-range"))
    assert mb.marker(m) == '`truncate` why="offset-out-of-range"'
    cut = {"event": "truncate", "why": "offset-out-of-range", "to": 3}
    taken = _run_dir(tmp_path / "r1", {"broker": {"truncation": "leader-epoch"}},
                     {"n1": [cut, {"event": "truncate", "why": "leader-epoch"}], "n2": [cut], "c0": [{"event": "x"}]})
    assert mb.path_taken(m, taken) == {"taken": True, "lines": 2,
                                       "why": '2 `truncate` why="offset-out-of-range" line(s) in the event logs'}
    other = _run_dir(tmp_path / "r2", {"broker": {"truncation": "leader-epoch"}},
                     {"n1": [{"event": "truncate", "why": "leader-epoch"}]})
    assert mb.path_taken(m, other)["taken"] is False
    assert "never took the path" in mb.path_taken(m, other)["why"]
    hw = _run_dir(tmp_path / "r3", {"broker": {"truncation": "hw"}}, {"n1": [cut]})
    assert mb.path_taken(m, hw) == {"taken": False, "lines": 0,
                                    "why": 'the path needs broker.truncation = "leader-epoch"; the run had "hw"'}
    unset = _run_dir(tmp_path / "r4", {}, {"n1": [cut]})
    assert "the run had unset" in mb.path_taken(m, unset)["why"]
    # acks is written "all" (test.json) or -1 (an `ack` line): alike; a boolean only matches a boolean
    acks = _marked(tmp_path / "x", 'needs = {"client.acks" = -1, "broker.power_loss" = false}\n'
                                   'reached = {event = "ack", acks = "all"}\n', name="acks")
    ack_line = {"event": "ack", "acks": -1}
    assert mb.path_taken(acks, _run_dir(tmp_path / "r5", {"client": {"acks": "all"}, "broker": {"power_loss": False}},
                                        {"n1": [ack_line]}))["taken"] is True
    assert mb.path_taken(acks, _run_dir(tmp_path / "r6", {"client": {"acks": "all"}, "broker": {"power_loss": 0}},
                                        {"n1": [ack_line]}))["taken"] is False
    assert mb.path_taken(acks, _run_dir(tmp_path / "r7", {"client": {"acks": 1}, "broker": {"power_loss": False}},
                                        {"n1": [ack_line]}))["taken"] is False
    assert [mb._same(h, w) for h, w in ((None, "none"), ("1", 1), (1.0, 1), ("Always", "always"))] == \
        [False, False, True, True]
    # --reach counts the run directories under a root
    assert mb.run_dirs([tmp_path]) == sorted(p.resolve() for p in (taken, other, hw, unset,
                                                                     tmp_path / "r5", tmp_path / "r6", tmp_path / "r7"))
    assert mb.path_taken(_marked(tmp_path / "y", ""), taken) is None
    # several mutants at once (one read of the run directory) answer as each alone
    several = [m, acks, _marked(tmp_path / "z", "", name="unmarked")]
    for d in (taken, other, hw, tmp_path / "r5", tmp_path / "r6"):
        assert mb.paths_taken(several, d) == {x.name: mb.path_taken(x, d) for x in several}
    for bad, match in (('reached = {why = "x"}\n', "reached must be a table with an `event`"),
                       ('needs = {flush = "never"}\n', "dotted"),
                       ('reached = {event = "ack", acks = [1]}\n', "reached.acks must be a single value")):
        with pytest.raises(mb.MutantError, match=match):
            _marked(tmp_path / f"bad{len(bad)}", bad)


def test_the_corpus_markers_name_events_the_broker_writes():
    from broker.eventlog import EVENT_FIELDS

    marked = [m for m in CORPUS if m.reached]
    assert {m.name for m in marked} >= {"out-of-range-cuts-to-log-start", "flush-admin-no-fsync",
                                        "lead-again-after-corruption", "acks1-skips-group-commit"}
    for m in marked:
        fields = dict(m.reached)
        event = fields.pop("event")
        assert event in EVENT_FIELDS, (m.name, event)
        assert set(fields) <= EVENT_FIELDS[event], (m.name, sorted(set(fields) - EVENT_FIELDS[event]))
