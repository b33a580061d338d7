"""The first run, as a new user does it: the README's Quick start and the CLI's promises."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli import build_parser, main
from tests.support.remote_util import free_port

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def quick_start(page: str = "README.md") -> tuple[list[str], str]:
    """Command lines of the Quick start's code blocks (README) or of a docs page, and the text."""
    text = (ROOT / page).read_text()
    if page == "README.md":
        text = text[text.index("## Quick start") :]
        text = text[: text.index("\n## ", 5)]
    sec = text
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", sec, re.S):
        lines += [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip()]
    return lines, sec


def local(cmd: str) -> str:
    """A Quick start line with ``.venv/bin/`` pointing at this test's venv."""
    return cmd.replace(".venv/bin/", f"{BIN}/")


def run_as_pasted(line: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    """A documented line as a user pastes it into bash (``.venv/bin/`` = this test's venv)."""
    return subprocess.run(
        ["bash", "-c", local(line)], cwd=cwd, capture_output=True, text=True, timeout=300, **kw
    )


def can_be_root() -> bool:
    """Root, or a user whose sudo needs no password: who can run the system lines here."""
    if os.geteuid() == 0:
        return True
    sudo = shutil.which("sudo")
    return bool(sudo) and subprocess.run([sudo, "-n", "true"], capture_output=True).returncode == 0


def test_quick_start_installs_and_starts_then_runs_the_tests():
    """First the install-and-start block, then the test command; serve stands alone."""
    lines, sec = quick_start()
    assert lines[0].startswith("$(command -v sudo) apt-get install -y") and "ffmpeg" in lines[0]
    assert lines[1] == "python3 -m venv .venv && .venv/bin/pip install -e '.[test]'"
    assert lines[2] == ".venv/bin/listenlab serve"  # not chained: it runs until Ctrl-C
    assert lines[3:] == [".venv/bin/python -m pytest"]
    assert "http://127.0.0.1:7860/" in sec


def test_quick_start_pip_and_test_lines_are_what_ci_runs():
    """CI (.ci/run) installs with the README's pip line and runs the README's test command."""
    lines, _ = quick_start()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    pip = lines[1].split("&& ", 1)[1].replace("pip install -e", "pip install -q -e")
    assert pip in ci
    assert lines[-1] in ci


def test_quick_start_apt_line_runs_as_written():
    """`$(command -v sudo) apt-get …` as pasted: as root the substitution is empty."""
    lines, _ = quick_start()
    if not can_be_root():
        pytest.skip("needs root or passwordless sudo")
    r = run_as_pasted(lines[0], ROOT)
    assert r.returncode == 0, r.stderr
    for pkg in ("ffmpeg", "chromium"):
        assert subprocess.run(["dpkg", "-s", pkg], capture_output=True).returncode == 0, pkg


def test_quick_start_serve_line_starts_the_playground(tmp_path):
    """The README's serve line, pasted: the banner names the address and / is the Playground."""
    lines, _ = quick_start()
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "0"}
    env.pop("LISTENLAB_DB", None)
    env.pop("LISTENLAB_DATA", None)
    proc = subprocess.Popen(
        ["bash", "-c", "exec " + local(lines[2])],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        banner = ""
        deadline = time.monotonic() + 180
        while "Playground on" not in banner and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            banner += line
        assert f"listenlab Playground on http://127.0.0.1:{port}/" in banner, banner
        import httpx

        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=60)
        assert page.status_code == 200 and "listenlab Playground" in page.text
        cfg = httpx.get(f"http://127.0.0.1:{port}/ll/api/config", timeout=60).json()
        assert "piper" in json.dumps(cfg)  # the CPU voice
        assert (tmp_path / "data" / "listenlab.db").is_file()  # the default store
    finally:
        proc.terminate()
        proc.wait(30)


def test_quick_start_say_line_finishes(tmp_path):
    lines, _ = quick_start("docs/install.md")
    say = next(ln for ln in lines if "listenlab say" in ln and "unshare" not in ln)
    r = run_as_pasted(say, tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.search(
        r"^load \d+ ms, then TTFA \d+ ms \(warm\)  RTF [\d.]+  \d+ chunks?  ", r.stdout
    )
    assert (tmp_path / "hello.wav").is_file() and (tmp_path / "hello.take.json").is_file()


def test_quick_start_offline_line_works_with_no_network(tmp_path):
    """The offline line exactly as documented (as root here: `$(command -v sudo)` is empty)."""
    lines, sec = quick_start("docs/install.md")
    line = next(ln for ln in lines if "unshare -n" in ln)
    assert line.startswith("$(command -v sudo) unshare -n sh -c 'ip link set lo up && ")
    assert "`lo`" in sec
    if not can_be_root():
        pytest.skip("needs root or passwordless sudo")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if os.geteuid() == 0 and probe.returncode != 0:
        pytest.skip("unshare -n is not permitted here")
    r = run_as_pasted(line, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "TTFA" in r.stdout and (tmp_path / "offline.wav").is_file()


def test_say_unsupported_suffix_is_an_error_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "x.mp3"
    assert main(["say", "Hello.", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot write 'x.mp3': takes are saved as .wav or .flac, not .mp3" in err
    assert list(tmp_path.iterdir()) == []
    assert main(["say", "Hello.", "-o", str(tmp_path / "noext")]) == 2
    assert list(tmp_path.iterdir()) == []


def test_say_prints_one_chunk_and_the_load_time(tmp_path, capsys):
    assert main(["say", "Hello.", "--backend", "piper?deterministic=1"]) == 0
    out = capsys.readouterr().out
    assert " 1 chunk " in out and "1 chunks" not in out
    assert out.startswith("load ") and "(warm)" in out
    assert main(["say", "Hi there.", "--json", "-o", str(tmp_path / "a.flac")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["load_ms"] > 0 and d["ttfa_ms"] > 0 and (tmp_path / "a.flac").is_file()


def test_say_ttfa_is_warm_and_load_is_separate(piper_det):
    """A voice that takes 1.5 s to load: the load is reported apart, the TTFA does not hold it."""
    from evaluation.takes import say
    from tests.support.app_util import TrackingBackend

    be = TrackingBackend(piper_det)
    loads = []

    def slow_warm_up():
        time.sleep(1.5)
        loads.append(1)

    be.warm_up = slow_warm_up
    take = asyncio.run(say("Hello there.", backend=be))
    assert loads == [1]
    assert take.meta["load_ms"] >= 1500
    assert take.ttfa_ms < take.meta["load_ms"] - 500  # measured from the request, after loading


def test_seams_are_numbered_from_one_in_analyze(tmp_path, capsys):
    """seam k = the start of chunk k: the replay fault at seam 1 prints as seam 1 (DB index 0)."""
    out = tmp_path / "r.wav"
    text = (
        "The old lighthouse keeper climbed the stairs. At the top, he wiped the salt from the lens."
    )
    assert (
        main(["say", text, "--backend", "piper?deterministic=1&fault=replay", "-o", str(out)]) == 0
    )
    capsys.readouterr()
    assert main(["analyze", str(out)]) == 0
    line = next(
        ln
        for ln in capsys.readouterr().out.splitlines()
        if "replay" in ln and not ln.lstrip().startswith(("checks run", "skipped"))
    )
    assert re.search(r"replay\s+seam\s+1\s", line), line
    from evaluation.glitches import detect
    from evaluation.takes import Take

    f = next(f for f in detect(Take.load(out)) if f.kind == "replay")
    assert f.boundary_index == 0 and f.seam == 1  # the DB keeps boundary indices from 0
    assert re.search(r"replay\s+seam\s+1\s", str(f))  # the API prints what the CLI prints


def test_report_labels_seams_like_the_playground():
    import inspect

    from evaluation import plots, report

    src = inspect.getsource(plots)  # the report's seam figure is drawn there
    assert "seam k: start of chunk k, chunks numbered from 0" in src
    import pandas as pd

    df = pd.DataFrame([[2, 1]], index=["sys"], columns=pd.Index([0, 3], name="boundary_index"))
    assert list(report._seam_columns(df).columns) == ["seam 1", "seam 4"]


def test_serve_on_a_busy_port_fails_before_any_banner(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run(
            [str(BIN / "listenlab"), "serve", "--port", str(port), "--db", str(tmp_path / "x.db")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 1
    assert "Playground on" not in r.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "--port" in r.stderr
    assert not (tmp_path / "x.db").exists()  # it failed before opening anything


def test_every_cli_option_has_help():
    parser = build_parser()
    missing = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                assert sp.description or a._name_parser_map[name], name
                for x in sp._actions:
                    if not isinstance(x, argparse._HelpAction) and not x.help:
                        missing.append(f"{name} {x.option_strings or x.dest}")
    assert missing == []
    cmds = set(
        next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    )
    assert {"say", "serve", "probe", "analyze", "report", "export", "api"} <= cmds


def test_env_table_lists_every_listenlab_variable_the_code_reads():
    from app.config import ENV

    names = {v.name for v in ENV}
    read = set()
    for folder in ("app", "backends", "voices", "evaluation", "tests"):
        for p in (ROOT / folder).rglob("*.py"):
            read |= set(re.findall(r"LISTENLAB_[A-Z0-9_]*[A-Z0-9]", p.read_text()))
    read |= set(re.findall(r"LISTENLAB_[A-Z0-9_]*[A-Z0-9]", (ROOT / "Dockerfile").read_text()))
    prefixes = {n for n in read if any(m.startswith(n + "_") for m in names)}  # f"..._{x}"
    assert read - names - prefixes == set(), (
        "document these in app/config.py ENV and docs/deploy.md"
    )
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    table = deploy[deploy.index("## Configuration") :]
    for v in ENV:
        assert f"`{v.name}`" in table, v.name


def test_a_command_imports_only_what_it_uses(tmp_path):
    """``listenlab --help`` and ``listenlab test list`` load no numerical or web stack (they
    once took 3.8-5.4 s importing FastAPI, SciPy and evalica to list rows of a table); timed in
    benchmarks/cli_speed.py."""
    from app.store import ListeningTest, Store

    db = tmp_path / "lab.db"
    with Store.open(db) as s:
        s.add_test(ListeningTest("t1", "mos", "one test"))
    heavy = ("numpy", "pandas", "scipy", "fastapi", "evalica", "gradio", "sqlite_utils")
    probe = (
        "import sys, contextlib, io\n"
        "from app.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main(sys.argv[1:])\n"
        f"print(out.getvalue()); print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    for argv in (["--help"], ["test", "list", "--db", str(db)]):
        r = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, r.stderr
        *shown, loaded = r.stdout.strip().splitlines()
        assert loaded == "[]", (argv, loaded)
        assert ("t1" in "\n".join(shown)) == (argv[0] == "test")
