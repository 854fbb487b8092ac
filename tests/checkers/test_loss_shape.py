"""Known answers for the loss shape (checkers/loss_shape.py): the rule on plain sequences, and both engines
on a history whose lost writes straddle the Spark engine's digest blocks (checkers/anomalies/loss_shape.py
reads only the blocks holding a lost write and stands one marker row in for each other block)."""
from __future__ import annotations

import pytest

from checkers import loss_shape
from checkers.anomalies.digests import BLOCK_BITS
from checkers.check import CheckOptions, check_run
from simulated_runs import RunBuilder

BLOCK = 1 << BLOCK_BITS


def shape(**classes: tuple[int, int]) -> dict:
    return {c: dict(zip(("writes", "runs"), classes.get(c, (0, 0)))) for c in loss_shape.CLASSES}


def seq(text: str) -> list[bool]:
    """'L' lost, '.' kept."""
    return [ch == "L" for ch in text]


@pytest.mark.parametrize("text,want", [
    ("", shape()),
    ("....", shape()),
    ("LL..", shape(prefix=(2, 1))),
    (".LL.", shape(middle=(2, 1))),
    ("..LL", shape(suffix=(2, 1))),
    ("L", shape(all=(1, 1))),
    ("LLL", shape(all=(3, 1))),
    ("L.LL.L..LLL", shape(prefix=(1, 1), middle=(3, 2), suffix=(3, 1))),
    (".L.L.L.", shape(middle=(3, 3))),
    ("L.", shape(prefix=(1, 1))),
    (".L", shape(suffix=(1, 1))),
])
def test_classify_known_answers(text, want):
    assert loss_shape.classify(seq(text)) == want


def test_as_json_lists_lossy_partitions_and_sums_them():
    doc = loss_shape.as_json({3: loss_shape.classify(seq("L..LL")), 1: loss_shape.classify(seq(".L.")),
                              0: loss_shape.classify(seq("...."))})
    assert doc == {"by_partition": {"1": shape(middle=(1, 1)), "3": shape(prefix=(1, 1), suffix=(2, 1))},
                   "total": shape(prefix=(1, 1), middle=(1, 1), suffix=(2, 1))}
    assert loss_shape.empty() == {"by_partition": {}, "total": shape()}


def _partition(b: RunBuilder, p: int, n: int, lost: set[int]) -> None:
    """Acks at offsets 0..n-1; at each offset in `lost` the final log holds an unacknowledged (info)
    value instead of the acknowledged one."""
    for o in range(n):
        b.send(1 + p, p, o, offset=o)
    for o in sorted(lost):
        b.send(50 + p, p, 1_000_000 + o, outcome="info")
    b.final(p, [1_000_000 + o if o in lost else o for o in range(n)], process=9000 + p, chunk=4000)


# partition 0: four blocks; block 2 is clean (one marker row). Lost: 0 (prefix), 4095 and 4096 (one run
# across blocks 0 and 1), 8191 (end of block 1) and 12288 (start of block 3): two runs, the clean block
# between them; the last offset (suffix).
LOST_0 = {0, BLOCK - 1, BLOCK, 2 * BLOCK - 1, 3 * BLOCK, 4 * BLOCK - 1}
# partition 1: block 0 clean, the last two acknowledged writes of block 1 lost: a suffix, not "all"
LOST_1 = {2 * BLOCK - 2, 2 * BLOCK - 1}
WANT = {"by_partition": {"0": shape(prefix=(1, 1), middle=(4, 3), suffix=(1, 1)), "1": shape(suffix=(2, 1))},
        "total": shape(prefix=(1, 1), middle=(4, 3), suffix=(3, 2))}


@pytest.fixture(scope="module")
def blocky(tmp_path_factory):
    run = tmp_path_factory.mktemp("loss-shape")
    b = RunBuilder()
    _partition(b, 0, 4 * BLOCK, LOST_0)
    _partition(b, 1, 2 * BLOCK, LOST_1)
    b.write(run)
    return run


def test_reference_loss_shape_across_blocks(blocky):
    res = check_run(blocky, CheckOptions(engine="reference", write=False))
    assert res["anomalies"]["lost-write"]["count"] == len(LOST_0) + len(LOST_1)
    assert res["anomalies"]["lost-write"]["loss_shape"] == WANT


@pytest.mark.spark
@pytest.mark.parametrize("path", ["small", "large"])
def test_spark_loss_shape_across_blocks(blocky, spark, monkeypatch, path):
    """Small: the lost writes come from the driver's list of findings; large: from the persisted union."""
    if path == "large":
        monkeypatch.setenv("HIGHWATER_SPARK_SMALL_ROWS", "0")
    res = check_run(blocky, CheckOptions(engine="spark", spark=spark, write=False))
    assert res["anomalies"]["lost-write"]["loss_shape"] == WANT
    assert "loss shape" in res["checker"]["phases_s"]


@pytest.mark.parametrize("lenient", [False, True])
def test_an_ack_without_offset_has_no_place_in_the_sequence(tmp_path, lenient):
    """Every acknowledged write is placed by its offset: an ok send without one is a format error (with
    --lenient the line is skipped, an input problem, and the run is never valid)."""
    from rundir.formats import FormatError

    b = RunBuilder()
    b.send(1, 0, 1, offset=0)
    b.send(1, 0, 2, offset=None)
    b.send(1, 0, 3, offset=2)
    b.final(0, [1, 9, 3])
    b.write(tmp_path)
    if not lenient:
        with pytest.raises(FormatError, match=r"history.jsonl:4: .*'value.offset'"):
            check_run(tmp_path, CheckOptions(engine="reference", write=False))
        return
    res = check_run(tmp_path, CheckOptions(engine="reference", write=False, lenient=True))
    assert res["valid"] == "unknown" and res["anomalies"]["lost-write"]["count"] == 0
    assert res["anomalies"]["lost-write"]["loss_shape"] == {"by_partition": {}, "total": shape()}
