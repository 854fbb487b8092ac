"""`highwater report` and `highwater serve`: exit codes, index refresh, listing, downloads, bind address."""
from __future__ import annotations

import http.client
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from report_fixtures import make_run

from harness.cli import main
from rundir.exits import EXIT_USAGE
from reports.server import make_server

REPO = Path(__file__).resolve().parents[2]


def test_report_command_writes_report_and_index(tmp_path, capsys):
    root = tmp_path / "results"
    run = make_run(root, "invalid")
    assert main(["report", str(run)]) == 0
    captured = capsys.readouterr()
    assert captured.out.split() == [str(run / "report.html")]          # the report's path, last
    assert captured.err == f"highwater report: index {root.resolve() / 'index.html'}\n"
    assert ">INVALID<" in (run / "report.html").read_text()
    assert "hw-truncation/20261121T224501Z/report.html" in (root / "index.html").read_text()


def test_report_command_outside_a_results_directory_skips_the_index(tmp_path, capsys):
    run = make_run(tmp_path / "somewhere", "valid")
    assert main(["report", "--no-index", str(run)]) == 0
    assert capsys.readouterr().out.split() == [str(run / "report.html")]
    assert not (tmp_path / "somewhere" / "index.html").exists()


def test_report_command_bad_input_is_one_line_and_254(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == f"highwater: {tmp_path / 'missing'}: no such run directory\n"
    run = make_run(tmp_path / "results", "valid")
    (run / "results.json").write_text('{"valid": 3}')
    assert main(["report", str(run)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.strip() == (f"highwater: {run / 'results.json'}: field 'valid' must be true, false or "
                           "\"unknown\", got 3")
    assert len(err.strip().splitlines()) == 1


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "results"
    run = make_run(root, "invalid")
    (run / "nodes" / "n1" / "odd <b>name.log").write_text("x\n")
    server = make_server(root, "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], run
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, resp.headers, body  # headers: case-insensitive


def test_server_lists_directories_with_download_links(served):
    port, _run = served
    status, headers, body = get(port, "/hw-truncation/20261121T224501Z/")
    text = body.decode()
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<a href="history.jsonl">history.jsonl</a>' in text
    assert '<a href="history.jsonl?download">download</a>' in text
    assert '<a href="nodes/">nodes/</a>' in text
    status, _h, body = get(port, "/hw-truncation/20261121T224501Z/nodes/n1/")
    text = body.decode()
    assert "odd &lt;b&gt;name.log" in text and "<b>name" not in text


def test_server_serves_files_as_text_or_as_downloads(served):
    port, run = served
    status, headers, body = get(port, "/hw-truncation/20261121T224501Z/history.jsonl")
    assert status == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body == (run / "history.jsonl").read_bytes()
    assert headers["Content-Disposition"] is None
    status, headers, body = get(port, "/hw-truncation/20261121T224501Z/nodes/n1/broker.log?download")
    assert status == 200
    assert headers["Content-Disposition"] == "attachment; filename*=UTF-8''broker.log"
    assert body == (run / "nodes" / "n1" / "broker.log").read_bytes()
    status, headers, _ = get(port, "/hw-truncation/20261121T224501Z/results.json")
    assert headers["Content-Type"] == "application/json; charset=utf-8"


def test_server_stays_inside_the_results_directory(served):
    port, _run = served
    status, _h, _b = get(port, "/../../../../etc/passwd")
    assert status == 404
    status, _h, _b = get(port, "/nope.html")
    assert status == 404


def test_server_does_not_follow_symlinks_out_of_the_results_directory(served, tmp_path):
    port, run = served
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text("secret\n")
    (run / "passwd").symlink_to(outside / "secret.txt")
    (run / "etc").symlink_to(outside)
    (run / "inner.jsonl").symlink_to(run / "history.jsonl")  # a link that stays inside is fine
    assert get(port, "/hw-truncation/20261121T224501Z/passwd")[0] == 404
    assert get(port, "/hw-truncation/20261121T224501Z/passwd?download")[0] == 404
    assert get(port, "/hw-truncation/20261121T224501Z/etc/")[0] == 404
    assert get(port, "/hw-truncation/20261121T224501Z/etc/secret.txt")[0] == 404
    assert get(port, "/hw-truncation/20261121T224501Z/etc")[0] == 404
    status, _h, body = get(port, "/hw-truncation/20261121T224501Z/inner.jsonl")
    assert status == 200 and body == (run / "history.jsonl").read_bytes()
    status, _h, body = get(port, "/hw-truncation/20261121T224501Z/")
    text = body.decode()
    assert status == 200 and 'href="inner.jsonl"' in text
    assert "passwd" not in text and 'href="etc/"' not in text and 'href="etc"' not in text


@pytest.mark.parametrize("sig, inherited", [(signal.SIGINT, signal.SIG_DFL), (signal.SIGINT, signal.SIG_IGN),
                                             (signal.SIGTERM, signal.SIG_DFL)],
                         ids=["ctrl-c", "SIGINT-in-background", "SIGTERM"])
def test_serve_command_binds_loopback_writes_index_and_stops_on_a_signal(tmp_path, sig, inherited):
    """SIGINT inherited ignored is how a non-interactive shell starts a background job (`highwater serve &`):
    Python then raises no KeyboardInterrupt, and serve hung until killed (once in a test run started so)."""
    root = tmp_path / "results"
    make_run(root, "valid")
    # a disposition of SIG_IGN or SIG_DFL survives exec, so a shim sets it and execs serve (no preexec_fn:
    # forking a pytest worker that runs other threads is not safe with one)
    shim = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.Handlers(int(sys.argv[1]))); "
            "os.execv(sys.executable, [sys.executable, '-m', 'harness.cli', *sys.argv[2:]])")
    proc = subprocess.Popen([sys.executable, "-c", shim, str(int(inherited)), "serve", "--results-dir", str(root),
                             "--port", "0"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith(f"Serving {root.resolve()} at http://127.0.0.1:"):
            proc.kill()
            _out, err = proc.communicate(timeout=10)
            pytest.fail(f"serve's first line was {line!r}; exit {proc.returncode}; stderr: {err[-3000:]}")
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        status, _h, body = get(port, "/")
        assert status == 200 and b"Chaos test results" in body and b"leader-epoch" in body
        assert (root / "index.html").exists()
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_serve_command_rejects_missing_directory(tmp_path, capsys):
    assert main(["serve", "--results-dir", str(tmp_path / "none")]) == EXIT_USAGE
    assert "no such results directory" in capsys.readouterr().err
