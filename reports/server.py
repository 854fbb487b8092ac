"""`highwater serve`: a small HTTP server for the results directory (http.server, threads).

Serves files under the results directory only, with a directory listing (name, size, modified, and a
download link per file), `?download` to get any file as an attachment, and the run files' types set so a
browser shows JSON lines and logs as text. Binds 127.0.0.1 unless told otherwise. A path whose resolved
location (symlinks followed) is outside the results directory is a 404 and is left out of listings.
"""
from __future__ import annotations

import datetime as _dt
import html
import os
import urllib.parse
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from pathlib import Path

TEXT_TYPES = {".jsonl": "text/plain; charset=utf-8", ".log": "text/plain; charset=utf-8",
              ".json": "application/json; charset=utf-8", ".html": "text/html; charset=utf-8",
              ".parquet": "application/octet-stream"}


class ResultsHandler(SimpleHTTPRequestHandler):
    server_version = "highwater-serve"

    def inside(self, path: str | os.PathLike) -> bool:
        """True when `path`, with every symlink resolved, is the results directory or under it."""
        root = os.path.realpath(self.directory)
        real = os.path.realpath(path)
        return real == root or real.startswith(root.rstrip(os.sep) + os.sep)

    def send_head(self):
        if not self.inside(self.translate_path(self.path)):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        return super().send_head()

    def guess_type(self, path: str | os.PathLike) -> str:
        return TEXT_TYPES.get(Path(path).suffix, None) or super().guess_type(path)

    def end_headers(self) -> None:
        query = urllib.parse.urlsplit(self.path).query
        if "download" in urllib.parse.parse_qs(query, keep_blank_values=True):
            name = Path(urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)).name or "download"
            quoted = urllib.parse.quote(name)
            self.send_header("Content-Disposition", f"attachment; filename*=UTF-8''{quoted}")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def list_directory(self, path: str | os.PathLike):
        try:
            entries = sorted(os.scandir(path), key=lambda e: (not e.is_dir(), e.name))
        except OSError:
            self.send_error(HTTPStatus.NOT_FOUND, "No permission to list directory")
            return None
        url_path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        title = f"highwater results: {url_path}"
        rows = []
        if url_path not in ("", "/"):
            rows.append('<tr><td><a href="../">../</a></td><td></td><td></td><td></td></tr>')
        for e in entries:
            if e.name.startswith(".") or e.name.endswith(".tmp") or not self.inside(e.path):
                continue
            is_dir = e.is_dir()
            name = e.name + ("/" if is_dir else "")
            href = urllib.parse.quote(name)
            try:
                st = e.stat()
                size = "" if is_dir else f"{st.st_size:,}"
                mtime = _dt.datetime.fromtimestamp(st.st_mtime, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            except OSError:
                size, mtime = "", ""
            link = "" if is_dir else f'<a href="{href}?download">download</a>'
            rows.append(f'<tr><td><a href="{href}">{html.escape(name)}</a></td><td class="r">{size}</td>'
                        f'<td>{mtime}</td><td>{link}</td></tr>')
        body = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
                '<style>body{font:14px system-ui,sans-serif;margin:24px;color:#1d2430}table{border-collapse:collapse}'
                'td,th{padding:3px 12px;border-bottom:1px solid #e3e7ec;text-align:left}.r{text-align:right}'
                'a{color:#2f6fd0;text-decoration:none}</style></head><body>'
                f'<h1>{html.escape(url_path)}</h1><table><thead><tr><th>name</th><th>bytes</th>'
                f'<th>modified (UTC)</th><th></th></tr></thead><tbody>{"".join(rows)}</tbody></table></body></html>')
        data = body.encode("utf-8")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return BytesIO(data)

    def log_message(self, format: str, *args) -> None:  # one short line per request on stderr
        if getattr(self.server, "quiet", False):
            return
        super().log_message(format, *args)


def make_server(results_dir: Path, host: str = "127.0.0.1", port: int = 8000, *, quiet: bool = False
                ) -> ThreadingHTTPServer:
    results_dir = Path(results_dir).resolve()
    handler = partial(ResultsHandler, directory=str(results_dir))
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    server.quiet = quiet  # type: ignore[attr-defined]
    return server
