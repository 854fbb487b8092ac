"""Unit tests for harness/progress.py: counts from history operations and the plain progress line."""
from __future__ import annotations

import io

from polling import eventually
from rundir.history import History
from harness.progress import Display, PhaseClock, Stats, phase_text, phases_summary, step_text, summary_line


def test_stats_count_completions_by_f_and_type(tmp_path):
    h = History(tmp_path / "h.jsonl")
    stats = Stats()
    h.listeners.append(stats)
    h.invoke(0, "send", {"partition": 0, "value": 1})
    h.complete(0, "ok", "send", {"partition": 0, "value": 1, "offset": 0, "epoch": 0})
    h.invoke(0, "send", {"partition": 0, "value": 2})
    h.complete(0, "info", "send", {"partition": 0, "value": 2}, error="TIMEOUT")
    h.invoke(1, "poll", {"partition": 0, "offset": 0})
    h.complete(1, "fail", "poll", {"partition": 0, "offset": 0}, error="NOT_LEADER")
    h.invoke("nemesis", "kill", {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"]})
    h.complete("nemesis", "info", "kill", {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"]})
    h.complete("harness", "info", "final-state", {"partition": 0})
    h.close()
    assert stats.snapshot() == {"send": {"ok": 1, "fail": 0, "info": 1}, "poll": {"ok": 0, "fail": 1, "info": 0}}
    assert stats.nemesis_ops == 1


def test_plain_display_lines():
    p = {"phase": "running", "elapsed": 3.0, "remaining": 27.0, "faults": ["kill n2"],
         "counts": {"send": {"ok": 5, "fail": 1, "info": 0}}}
    assert summary_line(p) == ("[ running] elapsed   3.0s remaining  27.0s | send ok=5 fail=1 info=0 | "
                               "faults: kill n2")
    out = io.StringIO()
    d = Display(lambda: p, stream=out, interval_s=3600)      # no phase clock: said at once
    d.update()                      # the phase starts: said at once
    d.update()                      # within the interval: no second line
    d.close()                       # the closing line is always printed
    assert out.getvalue().splitlines() == ["highwater: workload ...", summary_line(p)]


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def _source(clock: PhaseClock, phase: dict):
    return lambda: {"name": "chaos", "phase": clock.name, "elapsed": 0.0, "remaining": None, "faults": [],
                    "counts": {"send": {"ok": 5, "fail": 0, "info": 1}}, "phases": clock.snapshot(), **phase}


def test_phase_clock_names_each_phase_with_its_time():
    t = FakeClock()
    ph = PhaseClock(clock=t)
    ph.start("running")
    t.advance(20.0)
    ph.start("final")
    t.advance(12.3)
    assert phase_text(ph.snapshot()) == "final wait 12.3 s"
    ph.start("final")                     # the same phase again: still running, not restarted
    t.advance(0.5)
    assert phase_text(ph.snapshot()) == "final wait 12.8 s"
    ph.start("collect")
    t.advance(1.1)
    assert phase_text(ph.snapshot()) == "collecting replicas 1.1 s"
    ph.start("check")
    ph.step("reading input")
    t.advance(0.4)
    ph.step("statistics")
    t.advance(3.2)
    assert phase_text(ph.snapshot()) == "checking: statistics 3.2 s"
    assert step_text("checking", "checking (reference)") == "checking (reference)"
    ph.start("report")
    t.advance(0.4)
    assert phase_text(ph.snapshot()) == "writing report 0.4 s"
    ph.finish()
    snap = ph.snapshot()
    assert [(n, round(s, 6)) for n, s in snap["durations"]] == [
        ("running", 20.0), ("final", 12.8), ("collect", 1.1), ("check", 3.6), ("report", 0.4)]
    assert [(n, st, round(s, 6)) for n, st, s in snap["steps"]] == [
        ("check", "reading input", 0.4), ("check", "statistics", 3.2)]
    assert phases_summary(snap["durations"]) == ("phases: workload 20.0 s · final wait 12.8 s · collecting "
                                                 "replicas 1.1 s · checking 3.6 s · writing report 0.4 s "
                                                 "(total 37.9 s)")


def test_plain_display_prints_one_line_per_phase_through_the_end():
    t = FakeClock()
    ph = PhaseClock(clock=t)
    out = io.StringIO()
    d = Display(_source(ph, {}), stream=out, interval_s=5.0, clock=t, announce_after_s=0)
    ph.start("running")
    d.update()                            # the workload starts: said at once, then counts every interval
    t.advance(2.0)
    d.update()                            # within the interval: nothing
    t.advance(3.0)
    d.update()
    ph.start("final")
    t.advance(12.3)
    d.update()                            # the workload's end, and the final wait's start (late: 12.3 s)
    d.update()
    ph.start("final-reads")
    t.advance(0.7)
    ph.start("collect")
    t.advance(1.1)
    ph.start("check")
    ph.step("reading input")
    t.advance(0.4)
    d.update()
    ph.step("statistics")
    t.advance(3.2)
    ph.start("report")
    t.advance(0.4)
    ph.start("done")
    d.close()
    lines = out.getvalue().splitlines()
    counts = "send ok=5 fail=0 info=1 | faults: none"
    assert lines == [
        "highwater: workload ...",
        f"[ running] elapsed   0.0s | {counts}",
        "highwater: workload 5.0 s",
        "highwater: final wait ...",
        "highwater: final wait 12.3 s",
        "highwater: final reads 0.7 s",
        "highwater: collecting replicas 1.1 s",
        "highwater: checking: reading input ...",
        "highwater: checking: reading input 0.4 s",
        "highwater: checking: statistics 3.2 s",
        "highwater: checking 3.6 s",
        "highwater: writing report 0.4 s",
        f"[    done] elapsed   0.0s | {counts}",
        "highwater: phases: workload 5.0 s · final wait 12.3 s · final reads 0.7 s · collecting replicas 1.1 s "
        "· checking 3.6 s · writing report 0.4 s (total 23.1 s)",
    ]


def test_display_thread_keeps_going_while_the_caller_is_busy():
    """Nobody calls update() after the workload (the run is busy in its final phases): the display's own
    thread still prints each phase as it ends."""
    ph = PhaseClock()
    out = io.StringIO()
    d = Display(_source(ph, {}), stream=out, interval_s=3600).start(every_s=0.01)
    ph.start("final")
    ph.start("collect")
    assert eventually(lambda: "highwater: final wait " in out.getvalue())
    ph.start("check")
    ph.step("statistics")
    ph.start("report")
    assert eventually(lambda: "highwater: checking: statistics " in out.getvalue()
                     and "highwater: collecting replicas " in out.getvalue())
    d.close()
    assert out.getvalue().splitlines()[-1].startswith("highwater: phases: final wait ")


def test_terminal_panel_redraws_the_phase_by_itself():
    """On a terminal the live panel re-renders from the run's state on its own (it used to show the
    last table it was handed, frozen at 'remaining 0.2s')."""
    ph = PhaseClock()
    out = TtyStream()
    d = Display(_source(ph, {}), stream=out, force_plain=False)
    assert not d.plain
    ph.start("running")
    ph.start("check")
    ph.step("offsets and final logs")
    assert eventually(lambda: "checking: offsets and final logs" in out.getvalue())
    ph.start("report")
    d.close()
    assert "writing report" in out.getvalue()
    assert "highwater: phases: workload " in out.getvalue().splitlines()[-1]


def test_plain_display_says_every_interval_that_a_long_phase_goes_on():
    """A CI log is never silent for longer than the interval: a phase without operation counts (the
    final wait, a checker step) gets a line with its elapsed time every interval."""
    t = FakeClock()
    ph = PhaseClock(clock=t)
    out = io.StringIO()
    d = Display(_source(ph, {}), stream=out, interval_s=5.0, clock=t)
    ph.start("check")
    ph.step("reading input")
    d.update()
    t.advance(0.5)
    d.update()                            # a quick step: only its end is said
    ph.step("statistics")
    d.update()
    for _ in range(13):
        t.advance(1.0)
        d.update()
    ph.finish()
    d.update()
    assert out.getvalue().splitlines() == [
        "highwater: checking: reading input 0.5 s",
        "highwater: checking: statistics ...",          # said once it has lasted a second
        "highwater: checking: statistics 6.0 s so far",
        "highwater: checking: statistics 11.0 s so far",
        "highwater: checking: statistics 13.0 s",
        "highwater: checking 13.5 s",
    ]


def test_quiet_close_prints_the_steps_that_ended_before_the_failure_and_nothing_else():
    """A command that fails closes the display quietly before it ends the failed step: the lines are
    those of the steps that had ended, whether or not the thread had ticked since, and never the failed
    step, its phase or the phase summary (the error is the one line after them)."""
    for every_s in (0.001, 3600):        # the thread ticks all the time, or never
        ph = PhaseClock()
        out = io.StringIO()
        d = Display(_source(ph, {}), stream=out, interval_s=3600, announce_after_s=3600).start(every_s=every_s)
        ph.start("check")
        ph.step("reading input history")
        ph.step("reading input dumps")
        ph.step("starting Spark")          # the step that fails
        d.close(quiet=True)
        ph.finish()
        lines = out.getvalue().splitlines()
        assert [line.rsplit(" ", 2)[0] for line in lines] == [
            "highwater: checking: reading input history", "highwater: checking: reading input dumps"], lines
