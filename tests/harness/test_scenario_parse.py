"""Unit tests for harness/scenario.py: the shipped scenarios parse; bad files give one-line errors
naming the file, step number, line and field."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import scenario as S

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ["seed-data-loss", "seed-divergence", "kip-279", "kafka-7128"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_parse(name):
    sc = S.load(REPO / "scenarios" / f"{name}.toml", truncation="hw")
    assert sc.name == name
    assert sc.config.broker.truncation == "hw"
    assert sc.expect["leader-epoch"] == []
    assert sc.expect["hw"] in (["lost-write"], ["divergence"])
    assert sc.steps[0].do == "wait"
    assert all(s.number == i + 1 for i, s in enumerate(sc.steps))
    assert sc.config.nemesis.faults == []


def write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


BASE = '[cluster]\nnodes = 2\n[topic]\npartitions = 1\nreplication_factor = 2\n'


def load_error(tmp_path, steps: str) -> tuple[Path, str]:
    """The file BASE + `steps` and the error loading it, which must be one line."""
    p = write(tmp_path, BASE + steps)
    with pytest.raises(S.ConfigError) as e:
        S.load(p)
    text = str(e.value)
    assert "\n" not in text
    return p, text


def test_steps_parsed_with_defaults(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "produce"\ncount = 3\nacks = 1\n'
                              '[[step]]\ndo = "partition"\nisolate = "n1"\n'
                              '[[step]]\ndo = "wait"\nleader = "n2"\nnode = "n1"\nleo = 4\n'
                              '[[step]]\ndo = "power-loss"\nnode = "n2"\n')
    sc = S.load(p)
    produce, part, wait, pl = sc.steps
    assert produce.args == {"count": 3, "acks": 1, "partition": 0, "expect": "ok", "client": "native"}
    assert part.args == {"isolate": "n1", "drop": [("n1", "n2"), ("n2", "n1")], "from": ["n2"]}
    assert wait.args == {"leader": "n2", "node": "n1", "leo": 4, "timeout": 30.0, "partition": 0}
    assert (pl.do, pl.line) == ("power-loss", 18)
    assert sc.config.broker.power_loss is True        # power-loss steps need the emulation
    assert sc.config.broker.truncation == "leader-epoch"


@pytest.mark.parametrize("steps, message", [
    ('[[step]]\ndo = "explode"\n', "step 1: field 'do' must be one of"),
    ('[[step]]\ndo = "partiton"\n', "step 1: field 'do' must be one of"),          # and (did you mean ...)
    ('[[step]]\ndo = "heal"\n[[step]]\ndo = "kill"\n', "step 2 (kill): field 'node' is missing"),
    ('[[step]]\ndo = "kill"\nnode = "n7"\n', "step 1 (kill): field 'node' must be one of c0, n1, n2, got 'n7'"),
    ('[[step]]\ndo = "produce"\nacks = 3\n', "step 1 (produce): field 'acks' must be 0, 1 or \"all\", got 3"),
    ('[[step]]\ndo = "produce"\ncolour = 3\n', "step 1 (produce): unknown field 'colour'"),
    ('[[step]]\ndo = "produce"\ncout = 3\n', "step 1 (produce): unknown field 'cout' (allowed: count, acks, "
                                           "partition, expect, timeout, wait, client) (did you mean 'count'?)"),
    ('[[step]]\ndo = "produce"\ncount = 0\n', "step 1 (produce): field 'count' must be an integer >= 1, got 0"),
    ('[[step]]\ndo = "sleep"\nseconds = true\n', "step 1 (sleep): field 'seconds' must be a number above 0, got True"),
    ('[[step]]\ndo = "wait"\ntimeout = 3\n', "step 1 (wait): give at least one condition"),
    ('[[step]]\ndo = "wait"\nleo = 3\n', "step 1 (wait): field 'node' is needed with 'leo'"),
    ('[[step]]\ndo = "wait"\nleader = "n1"\ntimeout = -1\n', "step 1 (wait): field 'timeout' must be a number above 0"),
    ('[[step]]\ndo = "partition"\n', "step 1 (partition): give exactly one of 'drop' or 'isolate'"),
    ('[[step]]\ndo = "partition"\ndrop = [["n1", "n1"]]\n', "field 'drop' a node cannot be cut from itself"),
    ('[[step]]\ndo = "power-loss"\nnode = "c0"\n', "step 1 (power-loss): field 'node' must be one of n1, n2"),
    ('[[step]]\ndo = "sleep"\n', "step 1 (sleep): field 'seconds' is missing"),
])
def test_step_errors_name_file_step_line_field(tmp_path, steps, message):
    p, text = load_error(tmp_path, steps)
    assert message in text
    assert text.startswith(f"{p}:")


def test_step_error_line_number(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "heal"\n\n[[step]]\ndo = "kill"\nnode = 3\n')
    with pytest.raises(S.ConfigError) as e:
        S.load(p)
    assert str(e.value) == f"{p}:9: step 2 (kill): field 'node' must be one of c0, n1, n2, got 3"


def test_file_level_errors(tmp_path):
    with pytest.raises(S.ConfigError) as e:
        S.load(write(tmp_path, BASE))
    assert str(e.value) == f"{tmp_path / 's.toml'}: no steps (add [[step]] tables)"
    with pytest.raises(S.ConfigError) as e:
        S.load(write(tmp_path, BASE + '[nemesis]\nfaults = ["kill"]\n[[step]]\ndo = "heal"\n'))
    assert "a scenario has no [nemesis]" in str(e.value)
    with pytest.raises(S.ConfigError) as e:
        S.load(write(tmp_path, BASE + '[expect]\nhw = ["lost-writes"]\n[[step]]\ndo = "heal"\n'))
    assert "key 'expect.hw' has unknown anomaly kind 'lost-writes'" in str(e.value)
    with pytest.raises(S.ConfigError) as e:
        S.load(write(tmp_path, BASE.replace("nodes = 2", "nodes = 1") + '[[step]]\ndo = "heal"\n'))
    assert "key 'topic.replication_factor' must be between 1 and the number of nodes (1), got 2" in str(e.value)
    with pytest.raises(S.ConfigError) as e:
        S.load(write(tmp_path, 'colour = 1\n' + BASE + '[[step]]\ndo = "heal"\n'))
    # the message gained "did you mean" (rundir/settings.py)
    assert str(e.value) == f"{tmp_path / 's.toml'}:1: unknown key 'colour' (did you mean 'cluster'?)"


# --- issue 18: partial heal, degrade/restore, corrupt, flush, elect, mode, assert ------------------------

def test_new_steps_parsed_with_defaults(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "heal"\n'
                              '[[step]]\ndo = "heal"\ndrop = [["n1", "n2"]]\n'
                              '[[step]]\ndo = "heal"\nisolate = "n2"\nmode = "hw"\n'
                              '[[step]]\ndo = "flush"\nnode = "n2"\n'
                              '[[step]]\ndo = "flush"\nnode = "n1"\npartition = 0\nmode = ["leader-epoch", "hw"]\n'
                              '[[step]]\ndo = "elect"\n'
                              '[[step]]\ndo = "elect"\nnode = "n2"\nunclean = true\n'
                              '[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\n'
                              'match = {from = 2, to = 1, why = "hw"}\ncount = 0\nsince = 2\n'
                              '[[step]]\ndo = "assert"\nnode = "n2"\nepochs = [[0, 0], [1, 2]]\ntimeout = 9\n'
                              '[[step]]\ndo = "degrade"\nisolate = "n1"\ndelay_ms = 50\n'
                              '[[step]]\ndo = "restore"\ndrop = [["n1", "n2"]]\n'
                              '[[step]]\ndo = "restore"\n'
                              '[[step]]\ndo = "kill"\nnode = "n2"\n'
                              '[[step]]\ndo = "corrupt"\nnode = "n2"\nhow = "bitflip"\n'
                              '[[step]]\ndo = "assert"\nnode = "c0"\nevent = "fenced"\n')
    sc = S.load(p)
    got = [(s.do, s.args, s.modes) for s in sc.steps]
    assert got == [
        ("heal", {}, None),
        ("heal", {"drop": [("n1", "n2")]}, None),
        ("heal", {"isolate": "n2", "drop": [("n2", "n1"), ("n1", "n2")], "from": ["n1"]}, ("hw",)),
        ("flush", {"node": "n2"}, None),
        ("flush", {"node": "n1", "partition": 0}, ("leader-epoch", "hw")),
        ("elect", {"unclean": False, "partition": 0}, None),
        ("elect", {"node": "n2", "unclean": True, "partition": 0}, None),
        ("assert", {"node": "n1", "event": "truncate", "match": {"from": 2, "to": 1, "why": "hw"}, "count": 0,
                    "since": 2, "timeout": 5.0}, None),
        ("assert", {"node": "n2", "epochs": [[0, 0], [1, 2]], "timeout": 9, "partition": 0}, None),
        ("degrade", {"isolate": "n1", "drop": [("n1", "n2"), ("n2", "n1")], "from": ["n2"], "delay_ms": 50,
                     "jitter_ms": 0.0, "loss_pct": 0.0}, None),
        ("restore", {"drop": [("n1", "n2")]}, None),
        ("restore", {}, None),
        ("kill", {"node": "n2"}, None),
        ("corrupt", {"node": "n2", "how": "bitflip", "seed": 0}, None),
        ("assert", {"node": "c0", "event": "fenced", "match": {}, "timeout": 5.0}, None),
    ]
    assert [s.plays_in("leader-epoch") for s in sc.steps[2:5]] == [False, True, True]
    assert sc.steps[13].where(p) == f"{p}:53: step 14 (corrupt)"


@pytest.mark.parametrize("steps, message", [
    ('[[step]]\ndo = "heal"\ndrop = [["n1", "n2"]]\nisolate = "n1"\n', "step 1 (heal): give exactly one of 'drop' or 'isolate'"),
    ('[[step]]\ndo = "heal"\nfrom = ["n1"]\n', "step 1 (heal): field 'from' goes with 'isolate'"),
    ('[[step]]\ndo = "heal"\ndrop = []\n', "step 1 (heal): field 'drop' must be a non-empty list of [from, to] node pairs"),
    ('[[step]]\ndo = "restore"\ndrop = [["n1", "n9"]]\n', "step 1 (restore): field 'drop' must be one of c0, n1, n2, got 'n9'"),
    ('[[step]]\ndo = "degrade"\ndrop = [["n1", "n2"]]\n', "step 1 (degrade): field 'delay_ms' is missing"),
    ('[[step]]\ndo = "degrade"\ndelay_ms = 5\n', "step 1 (degrade): give exactly one of 'drop' or 'isolate'"),
    ('[[step]]\ndo = "degrade"\nisolate = "n1"\ndelay_ms = -5\n', "step 1 (degrade): field 'delay_ms' must be"),
    ('[[step]]\ndo = "degrade"\nisolate = "n1"\ndelay_ms = 5\nloss_pct = 101\n',
     "step 1 (degrade): field 'loss_pct' must be a percentage from 0 to 100, got 101"),
    ('[[step]]\ndo = "flush"\n', "step 1 (flush): field 'node' is missing"),
    ('[[step]]\ndo = "flush"\nnode = "c0"\n', "step 1 (flush): field 'node' must be one of n1, n2, got 'c0'"),
    ('[[step]]\ndo = "flush"\nnode = "n1"\npartition = 1\n', "step 1 (flush): field 'partition' must be below the topic's 1 partitions"),
    ('[[step]]\ndo = "elect"\nunclean = "yes"\n', "step 1 (elect): field 'unclean' must be true or false, got 'yes'"),
    ('[[step]]\ndo = "elect"\nnode = "n3"\n', "step 1 (elect): field 'node' must be one of n1, n2, got 'n3'"),
    ('[[step]]\ndo = "elect"\nunclen = true\n', "step 1 (elect): unknown field 'unclen' (allowed: node, unclean, partition, topic) "
                                              "(did you mean 'unclean'?)"),
    ('[[step]]\ndo = "sleep"\nseconds = 1\nmode = "kip-101"\n', "step 1 (sleep): field 'mode' must be one of hw, leader-epoch, got 'kip-101'"),
    ('[[step]]\ndo = "sleep"\nseconds = 1\nmode = []\n', "step 1 (sleep): field 'mode' must be a truncation mode"),
    ('[[step]]\ndo = "assert"\nevent = "truncate"\n', "step 1 (assert): field 'node' is missing"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\n', "step 1 (assert): field 'event' or 'epochs': give exactly one"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\nepochs = []\n', "field 'event' or 'epochs': give exactly one"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncation"\n',
     "step 1 (assert): field 'event' must be an event name (docs/formats.md), got 'truncation' (did you mean 'truncate'?)"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\nmatch = 2\n', "step 1 (assert): field 'match' must be a table"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\nmatch = {node = "n1"}\n', "field 'match' must not name 'node'"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "stale-fetch-served"\nmatch = {replcia = 2}\ncount = 0\n',
     "field 'match' names 'replcia', which a 'stale-fetch-served' event does not have (fields: leader_epoch, partition, "
     "replica, request, request_epoch, topic) (did you mean 'replica'?)"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\ncount = -1\n', "step 1 (assert): field 'count' must be an integer >= 0, got -1"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\nsince = 2\n',
     "step 1 (assert): field 'since' must name this step (1) or an earlier one, got 2"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\nsince = 0\n', "step 1 (assert): field 'since' must be a step number >= 1"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\npartition = 0\n',
     "step 1 (assert): field 'partition' goes with 'epochs' (for events, put it in 'match')"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\ntimeout = 0\n', "step 1 (assert): field 'timeout' must be a number above 0"),
    ('[[step]]\ndo = "assert"\nnode = "c0"\nepochs = [[0, 0]]\n', "step 1 (assert): field 'node' must be one of n1, n2, got 'c0'"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nepochs = [[0]]\n', "step 1 (assert): field 'epochs' must be a list of [epoch, start offset] pairs"),
    ('[[step]]\ndo = "assert"\nnode = "n1"\nepochs = [[0, 0]]\ncount = 1\n', "step 1 (assert): field 'count' goes with 'event', not 'epochs'"),
    ('[[step]]\ndo = "corrupt"\nnode = "n1"\n', "step 1 (corrupt): field 'how' is missing"),
    ('[[step]]\ndo = "corrupt"\nnode = "n1"\nhow = "bitflips"\n',
     "step 1 (corrupt): field 'how' must be one of bitflip, truncate, hw-checkpoint-delete"),
    ('[[step]]\ndo = "corrupt"\nnode = "n1"\nhow = "bitflip"\n',
     "step 1 (corrupt): field 'node' must name a broker that is down at this point (kill, stop or power-loss it "
     "first; in leader-epoch mode n1 is running)"),
    ('[[step]]\ndo = "kill"\nnode = "n1"\n[[step]]\ndo = "restart"\nnode = "n1"\n'
     '[[step]]\ndo = "corrupt"\nnode = "n1"\nhow = "truncate"\nseed = -1\n',
     "step 3 (corrupt): field 'seed' must be an integer >= 0, got -1"),
    ('[[step]]\ndo = "kill"\nnode = "n1"\nmode = "hw"\n[[step]]\ndo = "corrupt"\nnode = "n1"\nhow = "truncate"\n',
     "step 2 (corrupt): field 'node' must name a broker that is down at this point"),
])
def test_new_step_errors_name_file_step_line_field(tmp_path, steps, message):
    p, text = load_error(tmp_path, steps)
    assert message in text
    assert text.startswith(f"{p}:")


def test_new_step_error_names_its_line(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "heal"\n\n[[step]]\ndo = "assert"\nnode = "n1"\nevent = "truncate"\n'
                               'match = {to = 1}\ncount = 1.5\n')
    with pytest.raises(S.ConfigError) as e:
        S.load(p)
    assert str(e.value) == f"{p}:9: step 2 (assert): field 'count' must be an integer >= 0, got 1.5"


def test_corrupt_sees_the_node_down_only_in_the_modes_its_kill_plays(tmp_path):
    text = BASE + ('[[step]]\ndo = "kill"\nnode = "n1"\nmode = "hw"\n'
                   '[[step]]\ndo = "corrupt"\nnode = "n1"\nhow = "bitflip"\nmode = "hw"\n')
    p = write(tmp_path, text)
    assert [s.do for s in S.load(p, truncation="hw").steps] == ["kill", "corrupt"]
    assert [s.do for s in S.load(p, truncation="leader-epoch").steps] == ["kill", "corrupt"]   # both skip


def test_kafka_7415_scenario_parses_in_both_modes():
    path = REPO / "scenarios" / "kafka-7415.toml"
    plays = {}
    for mode in ("hw", "leader-epoch"):
        sc = S.load(path, truncation=mode)
        assert sc.expect == {"hw": [], "leader-epoch": []}
        plays[mode] = [s.number for s in sc.steps if s.do == "assert" and s.plays_in(mode)]
        assert [s.args.get("since") for s in sc.steps if s.do == "assert"] == [None, 7, 7, 7, 7, 7, None]
        assert sc.steps[8].do == "assert" and sc.steps[8].args["epochs"] == [[0, 0], [1, 1]]
        assert sc.steps[6].do == "elect" and sc.steps[6].args == {"node": "n2", "unclean": False, "partition": 0}
    assert plays == {"hw": [9, 10, 15, 18], "leader-epoch": [9, 12, 13, 14, 15, 18]}
    truncs = {s.modes: s.args["match"] for s in sc.steps if s.do == "assert" and s.args.get("event") == "truncate"
              and s.modes}
    assert truncs == {("hw",): {"from": 2, "to": 1, "why": "hw"},
                      ("leader-epoch",): {"from": 2, "to": 1, "why": "leader-epoch"}}


def test_docs_and_docstring_list_every_step_and_field():
    text = (REPO / "docs" / "running.md").read_text()
    section = text[text.index("## Scenarios"):text.index("### Shipped scenarios")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    for do in S.ACTIONS:
        row = next((r for r in rows if f"`{do}`" in r.split("|")[1]), None)
        assert row is not None, do
        if do != "wait":            # the wait fields are in the example above the table
            for name in S.STEP_FIELDS[do]:
                assert f"`{name}`" in row or f"`{name} =" in row, (do, name)
        assert f"- {do}" in S.__doc__ or f", {do}" in S.__doc__ or f"{do}:" in S.__doc__, do
        for name in S.STEP_FIELDS[do]:
            assert f"`{name}`" in S.__doc__, (do, name)
    for name in S.WAIT_CONDITIONS + ("partition", "timeout"):
        assert f"{name} =" in section, name
    assert "`mode`" in section and "`mode`" in S.__doc__


# --- produce without waiting, await ----------------------------------------------------------------

def test_produce_wait_false_and_await_parse(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "produce"\nacks = "all"\nwait = false\ntimeout = 40\n'
                              '[[step]]\ndo = "produce"\nwait = true\n'
                              '[[step]]\ndo = "await"\n'
                              '[[step]]\ndo = "await"\ntimeout = 5\nmode = "hw"\n')
    sc = S.load(p)
    bg, fg, aw, aw5 = sc.steps
    assert bg.args == {"count": 1, "acks": "all", "partition": 0, "expect": "ok", "timeout": 40, "wait": False,
                       "client": "native"}
    assert fg.args == {"count": 1, "acks": "all", "partition": 0, "expect": "ok", "wait": True,   # client.acks
                       "client": "native"}
    assert (aw.do, aw.args, aw.line) == ("await", {"timeout": 30.0}, 14)
    assert (aw5.args, aw5.modes) == ({"timeout": 5}, ("hw",))


@pytest.mark.parametrize("steps, message", [
    ('[[step]]\ndo = "produce"\nwait = "no"\n', ":6: step 1 (produce): field 'wait' must be true or false, got 'no'"),
    ('[[step]]\ndo = "produce"\nwait = 0\n', ":6: step 1 (produce): field 'wait' must be true or false, got 0"),
    ('[[step]]\ndo = "produce"\n[[step]]\ndo = "await"\n',
     ':8: step 2 (await): field \'do\' = "await" needs an earlier produce or commit step with wait = false (nothing to '
     'await)'),
    ('[[step]]\ndo = "await"\n[[step]]\ndo = "produce"\nwait = false\n',
     ':6: step 1 (await): field \'do\' = "await" needs an earlier produce or commit step with wait = false'),
    ('[[step]]\ndo = "produce"\nwait = false\n[[step]]\ndo = "await"\ntimeout = 0\n',
     ":9: step 2 (await): field 'timeout' must be a number above 0, got 0"),
    ('[[step]]\ndo = "produce"\nwait = false\n[[step]]\ndo = "await"\nnode = "n1"\n',
     ":9: step 2 (await): unknown field 'node' (allowed: timeout)"),
])
def test_produce_wait_and_await_errors_name_file_line_step_field(tmp_path, steps, message):
    p, text = load_error(tmp_path, steps)
    assert text.startswith(f"{p}{message}"), text


def test_a_misspelt_step_suggests_the_step_meant(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text('name = "typo"\n[[step]]\ndo = "partiton"\n')
    with pytest.raises(S.ConfigError, match=r"got 'partiton' \(did you mean 'partition'\?\)"):
        S.load(path)


def test_produce_client(tmp_path):
    """A produce step's client: native by default, kafka by default when [client] kind is kafka, and one
    clear error for anything else."""
    base = '[topic]\npartitions = 1\nreplication_factor = 1\n[cluster]\nnodes = 1\n[broker]\nmin_insync_replicas = 1\n'
    assert S.load(write(tmp_path, base + '[[step]]\ndo = "produce"\n')).steps[0].args["client"] == "native"
    kafka = base + '[client]\nkind = "kafka"\nidempotence = true\n[[step]]\ndo = "produce"\n'
    assert S.load(write(tmp_path, kafka)).steps[0].args["client"] == "kafka"
    with pytest.raises(S.ConfigError, match=r"s.toml:8: step 1 \(produce\): field 'client' must be one of "
                                            r"native, kafka, wire, got 'java'"):
        S.load(write(tmp_path, base + '[[step]]\ndo = "produce"\nclient = "java"\n'))
    shipped = S.load(REPO / "scenarios" / "idempotent-failover.toml", truncation="hw")
    assert shipped.config.client.idempotence and {s.args["client"] for s in shipped.steps if s.do == "produce"} == {"kafka"}


# --- the wire producer and resend ---------------------------------------------------------------------

def test_wire_produce_and_resend_parse(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "produce"\nclient = "wire"\nacks = "all"\ncount = 2\n'
                              '[[step]]\ndo = "resend"\nstep = 1\n'
                              '[[step]]\ndo = "resend"\nstep = 1\ntimeout = 5\nmode = "hw"\n')
    sc = S.load(p)
    wire, again, again_hw = sc.steps
    assert wire.args == {"client": "wire", "acks": "all", "count": 2, "partition": 0, "expect": "ok"}
    assert (again.args, again.line) == ({"step": 1, "timeout": 30.0}, 11)
    assert (again_hw.args, again_hw.modes) == ({"step": 1, "timeout": 5}, ("hw",))


WIRE = '[[step]]\ndo = "produce"\nclient = "wire"\nacks = "all"\n'


@pytest.mark.parametrize("steps, message", [
    ('[[step]]\ndo = "produce"\nclient = "wire"\nacks = 1\n',
     ':6: step 1 (produce): field \'acks\' must be "all" with client = "wire" (an idempotent producer), got 1'),
    (WIRE + 'wait = false\n',
     ':6: step 1 (produce): field \'wait\' must be true with client = "wire" (its sends go one at a time)'),
    (WIRE + '[[step]]\ndo = "resend"\n',
     ':10: step 2 (resend): field \'step\' is missing (the produce step with client = "wire" to send again)'),
    (WIRE + '[[step]]\ndo = "resend"\nstep = 0\n', ":10: step 2 (resend): field 'step' must be a step number >= 1"),
    (WIRE + '[[step]]\ndo = "resend"\nstep = 2\n',
     ':10: step 2 (resend): field \'step\' must name an earlier produce step with client = "wire", got 2'),
    ('[[step]]\ndo = "produce"\n[[step]]\ndo = "resend"\nstep = 1\n',
     ':8: step 2 (resend): field \'step\' must name an earlier produce step with client = "wire", got 1'),
    (WIRE + '[[step]]\ndo = "resend"\nstep = 1\nnode = "n1"\n',
     ":10: step 2 (resend): unknown field 'node' (allowed: step, timeout)"),
])
def test_wire_and_resend_errors_name_file_line_step_field(tmp_path, steps, message):
    p, text = load_error(tmp_path, steps)
    assert text.startswith(f"{p}{message}"), text


GROUP_SCENARIOS = [("kafka-20634", "group_coordinator_resigns_when_following"),
                   ("group-zombie-commit", "group_commit_checks_generation"),
                   ("group-offset-fetch-during-load", "group_offset_fetch_waits_for_load")]


@pytest.mark.parametrize("name, setting", GROUP_SCENARIOS)
def test_group_scenarios_parse_in_pairs(name, setting):
    """Each group bug is a pair of files with the same steps: the fixed setting expecting nothing, the
    planted one expecting committed-regression in both modes."""
    fixed = S.load(REPO / "scenarios" / f"{name}.toml")
    bug = S.load(REPO / "scenarios" / f"{name}-{ {'kafka-20634': 'unresigned', 'group-zombie-commit': 'unchecked'}.get(name, 'unwaited')}.toml")
    assert getattr(fixed.config.broker, setting) is True and getattr(bug.config.broker, setting) is False
    assert fixed.expect == {"hw": [], "leader-epoch": []}
    assert bug.expect == {"hw": ["committed-regression"], "leader-epoch": ["committed-regression"]}
    assert [(s.do, s.args) for s in fixed.steps] == [(s.do, s.args) for s in bug.steps]
    assert fixed.steps[-1].do == "committed" and fixed.config.broker.offsets_topic_partitions == 1


def test_group_steps_parsed_with_defaults(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "join"\nmember = "a"\n'
                              '[[step]]\ndo = "poll"\nmember = "a"\n'
                              '[[step]]\ndo = "commit"\nmember = "a"\noffset = 3\nwait = false\n'
                              '[[step]]\ndo = "await"\n'
                              '[[step]]\ndo = "committed"\n'
                              '[[step]]\ndo = "wait"\ntopic = "__consumer_offsets"\nleader = "n1"\n'
                              '[[step]]\ndo = "freeze"\nmember = "a"\n')
    join, poll, commit, _await, committed, wait, freeze = S.load(p).steps
    assert join.args == {"member": "a", "group": "g", "session_timeout_ms": 6000, "timeout": 30.0, "expect": "ok"}
    assert poll.args == {"member": "a", "count": 1000}
    assert commit.args == {"member": "a", "offset": 3, "wait": False, "timeout": 30.0, "expect": "ok"}
    assert committed.args == {"group": "g", "timeout": 30.0, "expect": "ok"}
    assert wait.args["topic"] == "__consumer_offsets" and wait.args["partition"] == 0
    assert freeze.args == {"member": "a"}


@pytest.mark.parametrize("steps, message", [
    ('[[step]]\ndo = "commit"\nmember = "a"\noffset = 1\n',
     "step 1 (commit): field 'member' must name a member joined by an earlier join step, got 'a'"),
    ('[[step]]\ndo = "join"\nmember = "a"\n[[step]]\ndo = "commit"\nmember = "a"\n',
     "step 2 (commit): field 'offset' is missing"),
    ('[[step]]\ndo = "join"\nmember = "a"\n[[step]]\ndo = "commit"\nmember = "a"\noffset = -1\n',
     "step 2 (commit): field 'offset' must be an integer >= 0"),
    ('[[step]]\ndo = "join"\nmember = ""\n', "step 1 (join): field 'member' must be a non-empty string"),
    ('[[step]]\ndo = "join"\nmember = "a"\ngroup = 7\n', "step 1 (join): field 'group' must be a non-empty string"),
    ('[[step]]\ndo = "committed"\nexpect = "maybe"\n', "step 1 (committed): field 'expect' must be one of"),
    ('[[step]]\ndo = "wait"\ntopic = "other"\nleader = "n1"\n',
     "step 1 (wait): field 'topic' must be the test topic 'hw' or '__consumer_offsets', got 'other'"),
    ('[[step]]\ndo = "elect"\ntopic = "__consumer_offsets"\npartition = 3\n',
     "step 1 (elect): field 'partition' must be below __consumer_offsets's 3 partitions"),
])
def test_group_step_errors(tmp_path, steps, message):
    p, text = load_error(tmp_path, steps)
    assert text.startswith(f"{p}:") and message in text, text
