"""A throwaway PostgreSQL cluster for tests and benchmarks: Debian's server, a temp folder, a
Unix socket only (no TCP port, so parallel runs never collide), stopped and deleted after.

Why not a mock: the store's PostgreSQL engine is only proven against the real server (its
types, its locks, its errors). ``LISTENLAB_TEST_PG`` (a server URL, e.g. the cluster `.ci/run`
starts) is used when set, so a run starts one server instead of one per test worker.
PostgreSQL refuses to run as root: as root the cluster runs as the ``postgres`` user (which
Debian's package creates) and the folder is given to it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

ENV_URL = "LISTENLAB_TEST_PG"
USER = "listenlab"


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server program: Debian keeps them in /usr/lib/postgresql/<major>/bin."""
    majors = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for d in reversed(majors):
        if (d / name).is_file():
            return str(d / name)
    return shutil.which(name)


def available() -> bool:
    """A server is given (``LISTENLAB_TEST_PG``) or can be started here (``initdb`` found)."""
    return bool(os.environ.get(ENV_URL)) or pg_bin("initdb") is not None


def _has_user(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _as_owner(cmd: list[str]) -> list[str]:
    """Run ``cmd`` as the cluster's owner: ourselves, or ``postgres`` when we are root."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@dataclass
class Cluster:
    """A running server; :meth:`url` names a database on it."""

    base_url: str
    """``postgresql://USER@/postgres?host=SOCKETDIR`` (the maintenance database)."""
    folder: Path | None = None
    """The temp folder holding data and socket (None: a server someone else runs)."""

    def url(self, dbname: str) -> str:
        head, _, query = self.base_url.partition("?")
        head = head.rsplit("/", 1)[0] + "/" + quote(dbname)
        return head + ("?" + query if query else "")

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.base_url, autocommit=True) as c:
            c.execute(sql)

    def new_database(self, prefix: str = "t", *, icu_locale: str | None = None) -> str:
        """A new empty database's URL (its name is random: tests never share one).
        ``icu_locale`` (e.g. ``en-US``) makes it sort text by that language's rules, as a
        managed server's default database often does (this cluster's own is byte order;
        PostgreSQL 15 or later, as Debian 12 has)."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        locale = ""
        if icu_locale:
            if not re.fullmatch(r"[A-Za-z0-9-]+", icu_locale):
                raise ValueError(f"not an ICU locale name: {icu_locale!r}")
            locale = f" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '{icu_locale}'"
        self.admin(f'CREATE DATABASE "{name}"{locale}')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.partition("?")[0].rsplit("/", 1)[1]
        with contextlib.suppress(Exception):
            self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self.folder is None:
            return
        subprocess.run(
            _as_owner(
                [
                    pg_bin("pg_ctl") or "pg_ctl",
                    "-D",
                    str(self.folder / "data"),
                    "-m",
                    "immediate",
                    "stop",
                ]
            ),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None


def start_cluster(*, durable: bool = False, max_connections: int = 200) -> Cluster:
    """Start a cluster in a new temp folder. ``durable=False`` turns fsync off (tests: nothing
    is kept); benchmarks pass True so a vote costs what it costs on a real server."""
    if os.environ.get(ENV_URL):
        return Cluster(os.environ[ENV_URL])
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    if os.geteuid() == 0 and not _has_user("postgres"):
        raise RuntimeError(
            "PostgreSQL refuses to run as root and there is no `postgres` user to run it as "
            "(Debian's postgresql package makes one; or run the tests as another user)"
        )
    folder = Path(tempfile.mkdtemp(prefix="ll-pg-"))
    folder.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    data, sock = folder / "data", folder
    out = subprocess.run(
        _as_owner(
            [initdb, "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-locale"]
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {out.stderr[-2000:]}")
    opts = [
        f"-k {sock}",
        "-c listen_addresses=''",
        f"-c max_connections={max_connections}",
        "-c shared_buffers=64MB",
    ]
    if not durable:
        opts += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
    out = subprocess.run(
        _as_owner(
            [
                pg_ctl,
                "-D",
                str(data),
                "-l",
                str(folder / "log"),
                "-w",
                "-t",
                "60",
                "-o",
                " ".join(opts),
                "start",
            ]
        ),
        capture_output=True,
        text=True,
        timeout=90,
    )
    if out.returncode:
        log = (
            (folder / "log").read_text(errors="replace")[-2000:]
            if (folder / "log").exists()
            else ""
        )
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {out.stderr[-1000:]} {log}")
    cluster = Cluster(f"postgresql://{USER}@/postgres?host={quote(str(sock))}", folder)
    _wait_ready(cluster)
    return cluster


def _wait_ready(cluster: Cluster, timeout_s: float = 30.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with psycopg.connect(cluster.base_url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# --------------------------------------------------------------------------- pytest fixtures
# A test module that uses them imports them (pytest finds them by their ``name``):
# ``from tests.support.postgres import db_target_fixture, pg_cluster_fixture, pg_url_fixture``.

try:
    import pytest
except ImportError:  # benchmarks import this module without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session", name="pg_cluster")
    def pg_cluster_fixture():
        """One throwaway server per test worker (or ``LISTENLAB_TEST_PG``'s). Wherever
        ``initdb`` is found (on the PATH, or Debian's /usr/lib/postgresql/<major>/bin) the
        PostgreSQL tests run, and a server that cannot start fails them; only a machine
        without PostgreSQL skips them, and CI, which must prove both engines, fails then too."""
        if not available():
            if os.environ.get("CI"):
                pytest.fail("PostgreSQL is needed under CI (apt-get install postgresql)")
            pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
        cluster = start_cluster()
        yield cluster
        cluster.stop()

    @pytest.fixture(name="pg_url")
    def pg_url_fixture(pg_cluster):
        """A new empty database for one test, dropped after it."""
        url = pg_cluster.new_database()
        yield url
        pg_cluster.drop_database(url)

    @pytest.fixture(params=["sqlite", "postgresql"], name="db_target")
    def db_target_fixture(request, tmp_path):
        """What ``--db`` would be for each engine: a SQLite file, or a new PostgreSQL
        database's URL (the same test runs on both)."""
        if request.param == "sqlite":
            return tmp_path / "lab.db"
        return request.getfixturevalue("pg_url")


__all__ = ["ENV_URL", "Cluster", "available", "pg_bin", "start_cluster"]
