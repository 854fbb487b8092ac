"""JUnit XML for a suite run: one <testcase> per configuration, for CI systems that read test reports.

    <testsuites name="highwater" tests= failures= errors= skipped= time=>
      <testsuite name="<suite>" timestamp= hostname= tests= failures= errors= skipped= time=>
        <properties> suite file, results directory, budget </properties>
        <testcase classname="highwater.<suite>" name="<configuration>" time=>
          <failure type="expectation" message="expected safe, but 1 of 2 repeats found ...">details</failure>
          | <error type="inconclusive" message="...">   | <skipped message="not run: ..."/>
          <system-out> expectation, settings, each repeat's verdict and report path </system-out>
        </testcase>

A passed configuration has no child but <system-out>. Written with ElementTree (escaping is its job).
"""
from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def _repeat_line(r: dict[str, Any]) -> str:
    counts = ", ".join(f"{k}={v}" for k, v in sorted((r.get("counts") or {}).items())) or "no anomalies"
    where = r.get("report") or r.get("run_dir") or "no run directory"
    return (f"repeat {r.get('index')}: valid={r.get('valid')} exit={r.get('exit_code')} seed={r.get('seed')} "
            f"{counts} ({float(r.get('elapsed_s') or 0):.1f}s) {where}")


def build(summary: dict[str, Any]) -> ET.ElementTree:
    """The JUnit tree for a suite summary (the suite.json document, harness/suite.py)."""
    configs = summary.get("configs") or []
    count = {s: sum(1 for c in configs if c.get("status") == s) for s in ("failed", "error")}
    count["skipped"] = sum(1 for c in configs if c.get("status") not in ("passed", "failed", "error"))
    total_time = f"{float(summary.get('elapsed_s') or 0):.3f}"
    root = ET.Element("testsuites", name="highwater", tests=str(len(configs)), failures=str(count["failed"]),
                      errors=str(count["error"]), skipped=str(count["skipped"]), time=total_time)
    suite = ET.SubElement(root, "testsuite", name=str(summary.get("suite")), tests=str(len(configs)),
                          failures=str(count["failed"]), errors=str(count["error"]),
                          skipped=str(count["skipped"]), time=total_time,
                          timestamp=str(summary.get("started_iso") or ""), hostname=socket.gethostname())
    props = ET.SubElement(suite, "properties")
    for key in ("file", "timestamp", "results_dir", "budget_s", "repeat_override", "only"):
        if summary.get(key) is not None:
            ET.SubElement(props, "property", name=key, value=str(summary[key]))
    classname = f"highwater.{summary.get('suite')}"
    for c in configs:
        case = ET.SubElement(suite, "testcase", classname=classname, name=str(c.get("name")),
                             time=f"{float(c.get('elapsed_s') or 0):.3f}")
        status, message = c.get("status"), str(c.get("message") or "")
        repeats = c.get("repeats") or []
        details = "\n".join(_repeat_line(r) for r in repeats)
        if status == "failed":
            ET.SubElement(case, "failure", type="expectation", message=message).text = details or message
        elif status == "error":
            ET.SubElement(case, "error", type="inconclusive", message=message).text = details or message
        elif status != "passed":  # skipped, or still pending in a suite that was cut short
            ET.SubElement(case, "skipped", message=message or f"not run ({status})")
        expect = c.get("expect") or {}
        expect_text = "safe" if expect.get("safe") else "finds " + ", ".join(expect.get("finds") or [])
        settings = ", ".join(f"{k}={v}" for k, v in (c.get("settings") or {}).items())
        out = [f"expectation: {expect_text}", f"result: {status}: {message}", f"settings: {settings}"]
        if details:
            out.append(details)
        ET.SubElement(case, "system-out").text = "\n".join(out)
    ET.indent(root)
    return ET.ElementTree(root)


def write(summary: dict[str, Any], path: Path) -> Path:
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    build(summary).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
    return path
