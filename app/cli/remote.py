"""``listenlab test … --server URL``: the same commands against a deployed server (a Space).

Why a client here: a study's audio is on the researcher's laptop and the server is a Space
with no shell. So every ``listenlab test`` command (create, list, results, open, close, and
``upload`` and ``export``) takes ``--server https://…`` and then speaks the admin routes instead
of opening a local store: the same JSON spec as ``POST /ll/admin/tests``, the same results JSON,
the same export zip. ``--stimuli DIR`` (or a ``.zip``) is first uploaded in 16 MiB chunks to
``/ll/admin/uploads`` (a cut-off upload resumes where the server stopped: run the command
again), imported and checked there, and the test refers to the imported set.

The admin password comes from ``$LISTENLAB_ADMIN_PASSWORD`` (sent as ``Authorization:
Bearer``), never from a flag (it would show in ``ps`` and the shell history), and only over
HTTPS, or plain HTTP to this machine itself (a loopback address or ``localhost``): any other
``http://`` server is refused before anything is sent. Certificates are verified (the system's
CAs, ``$SSL_CERT_FILE``, or ``--cacert FILE``); there is no switch to turn that off. Only the standard library is used (``http.client``, ``ssl``, ``zipfile``), so
the client starts fast and needs nothing the laptop lacks.

This module is the ``test`` command's entry (:data:`app.cli.COMMANDS`): it adds the local
commands of :mod:`app.listening.cli`, then ``--server``/``--cacert`` to each and the
``upload``/``export`` commands; a command run without ``--server`` works on the local store.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import io
import ipaddress
import json
import ssl
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from app.config import ENV_ADMIN_PASSWORD, admin_password
from backends.errors import BackendError, InvalidRequest

ENV_PASSWORD = ENV_ADMIN_PASSWORD
CHUNK_BYTES = 16 * 1024 * 1024
"""The server's per-request limit (``app.listening.upload.MAX_CHUNK_BYTES``)."""
RETRIES = 5
"""Times a chunk is re-sent (from the server's offset) after a dropped connection."""
TIMEOUT_S = 600.0
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
"""Every member's date in a zipped folder: the same folder gives the same bytes, so the same
upload id, and a second run resumes the first's upload."""


class RemoteError(BackendError):
    """The server answered with an error (its status and message), or could not be reached."""


@dataclass
class Client:
    """An admin client of one server: ``base`` like ``https://host:port``."""

    base: str
    password: str | None
    cafile: str | None = None
    timeout_s: float = TIMEOUT_S

    def __post_init__(self) -> None:
        parts = urlsplit(self.base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidRequest(f"--server must be an http(s):// URL, not {self.base!r}")
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise InvalidRequest(plain_http_refused(self.base))
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")

    def connection(self) -> http.client.HTTPConnection:
        if self.https:
            ctx = ssl.create_default_context(cafile=self.cafile)  # verifies host and chain
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout_s, context=ctx
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": "listenlab-cli"}
        if self.password:
            h["Authorization"] = f"Bearer {self.password}"
        return {**h, **(extra or {})}

    def request(
        self, method: str, path: str, body: Any = None, headers: dict | None = None
    ) -> bytes:
        """One request; the body is JSON (a dict) or bytes. An error status raises
        :class:`RemoteError` with the server's message."""
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        h = self.headers(headers)
        if isinstance(body, dict):
            h["Content-Type"] = "application/json"
        conn = self.connection()
        try:
            conn.request(method, self.prefix + path, body=data, headers=h)
            resp = conn.getresponse()
            raw = resp.read()
        except ssl.SSLError as e:
            raise RemoteError(f"TLS to {self.base} failed: {e} (see --cacert)") from None
        except OSError as e:
            raise RemoteError(f"cannot reach {self.base}: {e}") from None
        finally:
            conn.close()
        if resp.status >= 400:
            raise RemoteError(
                f"{method} {path}: HTTP {resp.status}: {message(raw)}",
                status=resp.status,
            )
        return raw

    def json(self, method: str, path: str, body: Any = None, headers: dict | None = None) -> Any:
        return json.loads(self.request(method, path, body, headers) or b"null")


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address: plain HTTP never leaves this machine."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def plain_http_refused(base: str) -> str:
    return (
        f"--server {base}: plain http:// would send the admin password unencrypted over the "
        "network; use https:// (a Space is https://OWNER-NAME.hf.space; put your own server "
        "behind a TLS proxy such as Caddy, or reach it through an SSH tunnel: ssh -L "
        "7860:localhost:7860 HOST, then --server http://127.0.0.1:7860). Plain http:// is "
        "accepted only to this machine (127.0.0.1, ::1, localhost)."
    )


def message(raw: bytes) -> str:
    """The server's error message (``detail``), else the start of the body."""
    try:
        d = json.loads(raw)
        return str(d.get("detail") or d.get("error") or d)
    except (ValueError, AttributeError):
        return raw[:300].decode("utf-8", "replace")


# --------------------------------------------------------------------------- the upload


def zip_folder(folder: Path, out: Path) -> Path:
    """A stimuli folder as a stored (uncompressed: audio does not shrink) zip whose bytes
    depend only on the files: sorted names, fixed dates. Hidden files are left out."""
    folder = folder.resolve()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for p in sorted(folder.rglob("*")):
            rel = p.relative_to(folder)
            if any(part.startswith(".") for part in rel.parts) or not p.is_file():
                continue
            info = zipfile.ZipInfo(rel.as_posix(), ZIP_DATE)
            info.external_attr = 0o644 << 16
            with p.open("rb") as src, z.open(info, "w", force_zip64=True) as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
    return out


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


Progress = Callable[[int, int], None]


def upload_zip(client: Client, archive: Path, progress: Progress | None = None) -> dict:
    """Send ``archive`` (resuming an earlier, cut-off upload of the same bytes) and import
    it; the imported set (``path``, ``systems``, ``files``…)."""
    digest = sha256_of(archive)
    size = archive.stat().st_size
    info = client.json(
        "POST",
        "/ll/admin/uploads",
        {"name": archive.name, "size": size, "key": digest[:32], "sha256": digest},
    )
    if info.get("imported"):  # these bytes are on the server already
        if progress:
            progress(size, size)
        return info["imported"]
    uid = info["upload_id"]
    offset = int(info["offset"])
    chunk = min(CHUNK_BYTES, int(info.get("chunk_bytes") or CHUNK_BYTES))
    failures = 0
    with archive.open("rb") as f:
        while offset < size:
            f.seek(offset)
            block = f.read(chunk)
            end = offset + len(block) - 1
            try:
                got = client.json(
                    "PUT",
                    f"/ll/admin/uploads/{uid}",
                    block,
                    {
                        "Content-Range": f"bytes {offset}-{end}/{size}",
                        "Content-Type": "application/octet-stream",
                    },
                )
                offset = int(got["offset"])
                failures = 0
            except RemoteError as e:
                failures += 1
                if failures > RETRIES or (e.status or 0) not in (0, 409, 502, 503, 504):
                    raise
                time.sleep(min(8.0, 0.5 * 2**failures))
                offset = int(client.json("GET", f"/ll/admin/uploads/{uid}")["offset"])
            if progress:
                progress(offset, size)
    return client.json("POST", f"/ll/admin/uploads/{uid}/import", {})


def upload_stimuli(client: Client, source: str, progress: Progress | None = None) -> dict:
    """A folder (zipped here first) or a ``.zip``, uploaded and imported on the server."""
    src = Path(source)
    if src.is_file() and src.suffix.lower() == ".zip":
        return upload_zip(client, src, progress)
    if not src.is_dir():
        raise InvalidRequest(f"--stimuli {source}: not a folder or a .zip on this machine")
    with tempfile.TemporaryDirectory(prefix="listenlab-upload-") as tmp:
        archive = zip_folder(src, Path(tmp) / f"{src.resolve().name or 'stimuli'}.zip")
        return upload_zip(client, archive, progress)


class Bar:
    """``uploading 41% (210/512 MB)`` on stderr, overwritten on a terminal."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        pct = int(100 * done / max(1, total))
        if pct == self.last:
            return
        self.last = pct
        line = f"uploading {pct}% ({done / 1e6:.0f}/{total / 1e6:.0f} MB)"
        self.stream.write(("\r\x1b[K" + line) if self.tty else line + "\n")
        if self.tty and done >= total:
            self.stream.write("\n")
        self.stream.flush()


# --------------------------------------------------------------------------- commands


def client_of(args: argparse.Namespace) -> Client:
    """The server's client, with the admin password (read once, here, from the environment
    by :func:`app.config.admin_password`)."""
    return Client(args.server, admin_password(), args.cacert)


def run_upload(args: argparse.Namespace) -> int:
    found = upload_stimuli(client_of(args), args.source, Bar())
    if args.json:
        print(json.dumps(found))
    else:
        print(
            f"imported {found['files']} files ({found['bytes'] / 1e6:.1f} MB): "
            f"{len(found['systems'])} systems x {found['prompts']} prompts at {found['path']}"
        )
    return 0


def run_create(args: argparse.Namespace) -> int:
    from app.listening.cli import spec_from_args

    c = client_of(args)
    spec = spec_from_args(args)
    if spec.get("gold_clip"):
        raise InvalidRequest(
            "--gold-clip names a file on this machine, which the server cannot read: with "
            "--server, bring the recordings as a system named natural in --stimuli"
        )
    stimuli = spec.get("stimuli")
    if stimuli and not str(stimuli).startswith("server:"):
        spec["stimuli"] = upload_stimuli(c, str(stimuli), Bar())["path"]
    elif stimuli:
        spec["stimuli"] = str(stimuli)[len("server:") :]
    made = c.json("POST", "/ll/admin/tests", spec)
    out = {**made, "url": c.base.rstrip("/") + made["url"]}
    print(json.dumps(out) if args.json else f"test {out['test_id']}: raters open {out['url']}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from app.listening.cli import text_table

    rows = client_of(args).json("GET", "/ll/admin/tests")["tests"]
    if args.json:
        print(json.dumps({"tests": rows}))
    else:
        print(text_table(rows) if rows else "no tests")
    return 0


def run_results(args: argparse.Namespace) -> int:
    """As ``test results ID --db``: the tables as text (``--json``: the route's JSON), and
    with ``--csv DIR`` the export's files (``--public``: without crowd ids and codes)."""
    c = client_of(args)
    tid = quote(args.test_id)
    q = "?include_screened=true" if args.include_screened else ""
    tables = c.json("GET", f"/ll/admin/tests/{tid}/results{q}")
    if args.csv:
        public = "?public=true" if args.public else ""
        write_zip(Path(args.csv), c.request("GET", f"/ll/admin/tests/{tid}/export.zip{public}"))
    if args.json:
        print(json.dumps(tables))
        return 0
    listed = c.json("GET", "/ll/admin/tests")["tests"]
    t = next((x for x in listed if x.get("test_id") == args.test_id), {})
    print_tables(f"{t.get('name')} ({t.get('kind')}, {t.get('status')})", tables)
    return 0


def write_zip(folder: Path, data: bytes) -> None:
    """The export zip's files under ``folder``, byte for byte (what ``--db --csv`` writes);
    a member that would land outside ``folder`` is refused."""
    root = folder.resolve()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for name in z.namelist():
            target = (root / name).resolve()
            if not target.is_relative_to(root) or name.endswith("/"):
                raise RemoteError(f"the server's export holds an unexpected entry {name!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))


def print_tables(header: str, tables: dict[str, list[dict]]) -> None:
    """The results tables as ``test results ID --db`` prints them."""
    import pandas as pd

    print(header)
    with pd.option_context("display.width", 160, "display.max_columns", 30):
        for name, rows in tables.items():
            df = pd.DataFrame(rows)
            print(f"\n== {name} ==")
            print(df.to_string(index=False) if not df.empty else "(none)")


def run_status(args: argparse.Namespace) -> int:
    status = "open" if args.command_test == "open" else "closed"
    body: dict[str, Any] = {"status": status}
    if getattr(args, "confirm_not_persistent", False):
        body["confirm_not_persistent"] = True  # what the server's 409 asks for
    client_of(args).json("POST", f"/ll/admin/tests/{quote(args.test_id)}/status", body)
    print(f"test {args.test_id} is {status}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    if args.format == "hf" or args.push:  # the dataset: app/listening/export_cli.py
        from app.listening.export_cli import run_hf

        return run_hf(args)
    out = Path(args.out or f"{args.test_id}.zip")
    if args.server:
        query = "?public=true" if args.public else ""
        data = client_of(args).request(
            "GET", f"/ll/admin/tests/{quote(args.test_id)}/export.zip{query}"
        )
    else:
        from app.config import resolve_db
        from app.listening.routes import export_zip
        from app.listening.service import Listening
        from app.store import open_store

        store = open_store(args.db or resolve_db(), read_only=True)
        try:
            data = export_zip(Listening(store), args.test_id, args.public)
        finally:
            store.close()
    out.write_bytes(data)
    print(f"wrote {out} ({len(data):,} bytes)")
    return 0


REMOTE: dict[str, Callable[[argparse.Namespace], int]] = {
    "create": run_create,
    "list": run_list,
    "results": run_results,
    "open": run_status,
    "close": run_status,
}
"""``listenlab test`` commands that can run against ``--server``."""


def either(local: Callable, remote: Callable) -> Callable[[argparse.Namespace], int]:
    """The local command, or with ``--server`` the remote one."""

    def run(args: argparse.Namespace) -> int:
        if getattr(args, "server", None):
            return remote(args)
        if getattr(args, "cacert", None):
            raise InvalidRequest("--cacert goes with --server")
        return local(args)

    return run


def server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server",
        metavar="URL",
        help="run against a deployed server (https://…) instead of a local store; the admin "
        f"password comes from ${ENV_PASSWORD}",
    )
    p.add_argument(
        "--cacert",
        metavar="FILE",
        help="PEM file of the CA that signed the server's certificate (default: the system's, "
        "or $SSL_CERT_FILE); verification cannot be turned off",
    )


def add_cli(sub: argparse._SubParsersAction) -> None:
    from app.listening.cli import add_cli as add_local
    from app.listening.export_cli import export_flags

    add_local(sub)
    tsub = next(
        a for a in sub.choices["test"]._actions if isinstance(a, argparse._SubParsersAction)
    )
    for name, p in tsub.choices.items():
        if name in REMOTE:
            server_options(p)
            p.set_defaults(func=either(p.get_default("func"), REMOTE[name]))
    up = tsub.add_parser(
        "upload",
        help="upload a folder of audio (or its .zip) to a server and import it",
        description="Upload DIR/SYSTEM/PROMPT_ID.wav|flac (or a .zip of it) to --server in "
        "16 MiB chunks (run again to resume a cut-off upload); the server checks every file "
        "and prints the set's path, which `test create --stimuli server:PATH` takes.",
    )
    up.add_argument("source", metavar="DIR_OR_ZIP")
    server_options(up)
    up.add_argument("--json", action="store_true", help="print the imported set as JSON")
    up.set_defaults(func=lambda a: run_upload(a) if a.server else missing_server("upload"))
    ex = tsub.add_parser(
        "export",
        help="a test's raw rows, results and figures as a zip, or a Hugging Face dataset",
    )
    ex.add_argument("test_id", metavar="ID")
    ex.add_argument("--db", help="SQLite store (default as `test list`)")
    ex.add_argument(
        "--out",
        metavar="FILE_OR_DIR",
        help="where to write the zip (default ID.zip), or the dataset's folder (--format hf)",
    )
    server_options(ex)
    export_flags(ex)
    ex.set_defaults(func=run_export)


def missing_server(command: str) -> int:
    raise InvalidRequest(f"`listenlab test {command}` needs --server URL")


__all__ = [
    "Client",
    "RemoteError",
    "add_cli",
    "upload_stimuli",
    "upload_zip",
    "zip_folder",
]
