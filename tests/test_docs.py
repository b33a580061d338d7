"""The manual as a newcomer uses it: every address it names answers, every command it prints parses.

Paths are collected from README.md and docs/*.md (not from a list kept here), so a page that
names a new address is checked the day it is written, and a path that is neither an address of
the two servers nor a known filesystem path fails until it is classified below.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import httpx
import pytest

from app.api import not_served
from app.cli import build_parser
from tests.support.app_util import create_test, live_server, tmp_db
from tests.support.remote_util import serve_api

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# First path segments of the two servers: `listenlab serve` and `listenlab api`.
SERVE_ROOTS = {"", "ll", "admin", "arena", "listen", "docs", "redoc"}  # docs, redoc: FastAPI's
API_ROOTS = {"v1", "health", "ping", "version", "load", "metrics", "invocations"}
# First segments that are files and folders, never addresses (Docker image, model dirs, …).
FS_ROOTS = {"data", "home", "models", "path", "local", "tmp", "usr", "dev", "etc", "prefix"}
WEBSOCKETS = {"/ll/ws", "/v1/audio/speech/stream"}
# vLLM-Omni's routes that listenlab api refuses in its shape (404): they must stay refused
NOT_SERVED = {path for path, _methods, _api in not_served.NOT_SERVED}
PASSWORD = "docs-admin-pw"
SYSTEMS = {"piper": "piper?deterministic=1", "qwen": "piper?deterministic=1&profile=qwen3-tts"}

# A path in prose or code: after a space, quote, bracket or backtick, or after `:7860`.
PATH_RE = re.compile(r"(?:(?<=[\s`(\"'])|(?<=:7860))(/(?:[A-Za-z0-9_{}.…/-]*[A-Za-z0-9_}/])?)")
METHOD_RE = re.compile(r"\b(GET|POST|DELETE|PUT|PATCH)\s+`?(/[^\s`]*)")


def page_text() -> str:
    return "\n".join(p.read_text() for p in PAGES)


def documented_paths() -> dict[str, str]:
    """``{path: method}`` for every address the pages name (method as written, else GET)."""
    text = page_text()
    methods = {m.group(2).rstrip(".,;:)"): m.group(1) for m in METHOD_RE.finditer(text)}
    found: dict[str, str] = {}
    unclassified = []
    for m in PATH_RE.finditer(text):
        path = m.group(1)
        if path.startswith("//") or "…" in text[m.start() : m.end() + 1]:  # `/ll/api/…`: a family
            continue
        first = path.split("/")[1]
        if first in FS_ROOTS or "." in first:
            continue
        if first not in SERVE_ROOTS | API_ROOTS:
            unclassified.append(path)
            continue
        found[path] = methods.get(path, found.get(path, "GET"))
    assert unclassified == [], "classify these paths in tests/test_docs.py"
    return found


def test_the_collector_finds_the_addresses_a_newcomer_needs():
    paths = documented_paths()
    for p in ("/", "/admin/tests", "/arena", "/listen/TEST_ID", "/ll/admin/tests", "/v1/models"):
        assert p in paths, p
    assert paths["/ll/admin/login"] == "POST"
    assert not any(p.startswith(("/data", "/home", "/models")) for p in paths)


def forms(path: str) -> list[str]:
    """The path as written and with its trailing slash toggled (``/`` has one form)."""
    if path == "/":
        return [path]
    return [path, path.rstrip("/") if path.endswith("/") else path + "/"]


@pytest.fixture(scope="module")
def servers():
    """The Playground app (with its Gradio pages) and a `listenlab api`, on real ports."""
    from app.server import create_app

    old = os.environ.get("LISTENLAB_ADMIN_PASSWORD")
    os.environ["LISTENLAB_ADMIN_PASSWORD"] = PASSWORD
    try:
        app = create_app(dict(SYSTEMS), tmp_db())
    finally:
        if old is None:
            os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
        else:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old
    with live_server(app) as live, serve_api("piper?deterministic=1") as api:
        admin = {"Authorization": f"Bearer {PASSWORD}"}
        test_id = create_test(live, admin, items_per_rater=1, screening=False)
        take_id = live.state.store.db.execute("SELECT take_id FROM takes LIMIT 1").fetchone()[0]
        clip = ROOT / "assets" / "reference_joe.wav"
        r = httpx.post(
            live.url + "ll/api/voices",
            files={"file": (clip.name, clip.read_bytes(), "audio/wav")},
            data={
                "name": "docs",
                "ref_text": (ROOT / "assets/reference_joe.txt").read_text(),
                "consent": "yes",
            },
            headers=admin,
            timeout=120,
        )
        assert r.status_code == 200, r.text
        ids = {"TEST_ID": test_id, "take": take_id, "voice": r.json()["voice"]["voice_id"]}
        yield live, api.rstrip("/") + "/", ids


def concrete(path: str, ids: dict[str, str]) -> str:
    """The documented path with its placeholders (TEST_ID, ID) replaced by real ids."""
    path = path.replace("TEST_ID", ids["TEST_ID"])
    if path.startswith("/ll/api/takes/"):
        return path.replace("ID", ids["take"])
    if path.startswith("/ll/api/voices/"):
        return path.replace("ID", ids["voice"])
    return path.replace("/ID/", f"/{ids['TEST_ID']}/")


def expected_page(path: str, admin: bool) -> tuple[int, str] | None:
    """(status, text the body must hold) for the pages a person opens; None for routes."""
    if path in {"/", ""}:
        return 200, "listenlab Playground"
    if path.startswith("/admin/tests"):
        return (200, "listenlab listening tests") if admin else (403, "Admin only")
    if path.startswith("/arena"):
        return 200, "listenlab arena"
    if path.startswith("/listen/"):
        return 200, 'id="lt-root"'
    return None


@pytest.mark.parametrize("admin", [False, True], ids=["logged-out", "admin"])
def test_every_documented_address_answers_with_and_without_a_trailing_slash(servers, admin):
    live, api_url, ids = servers
    paths = documented_paths()
    failures = []
    with httpx.Client(follow_redirects=True, timeout=60) as c:
        if admin:  # as a browser does it: the login form, then the signed cookie
            r = c.post(live.url + "ll/admin/login", data={"password": PASSWORD})
            assert r.status_code == 200 and "ll_admin" in c.cookies
        for doc_path, method in sorted(paths.items()):
            if doc_path in WEBSOCKETS:
                continue
            path = concrete(doc_path, ids)
            base = api_url if path.split("/")[1] in API_ROOTS else live.url
            canonical = None
            for form in forms(path):
                kw = {"json": {}} if method == "POST" else {}
                r = c.request(
                    method, base.rstrip("/") + form, headers={"Accept": "text/html"}, **kw
                )
                where = f"{method} {form} ({'admin' if admin else 'logged out'})"
                if doc_path in NOT_SERVED:
                    if r.status_code != 404:
                        failures.append(f"{where}: documented as not served, got {r.status_code}")
                    continue
                if r.status_code == 404 or r.status_code >= 500:
                    failures.append(f"{where}: {r.status_code} {r.text[:80]}")
                    continue
                # both forms end on the same page: the same address, or (a file under a
                # mount, the login form shown in place of an admin page) the same body
                final = (r.url.path, r.status_code, r.content)
                if canonical is None:
                    canonical = final
                elif final[0] != canonical[0] and final[1:] != canonical[1:]:
                    failures.append(f"{where}: ended at {final[0]}, not at {canonical[0]}")
                want = expected_page(doc_path, admin)
                if want and (r.status_code != want[0] or want[1] not in r.text):
                    failures.append(f"{where}: {r.status_code}, not the page with {want[1]!r}")
    assert failures == [], "\n".join(failures)


def test_slash_redirects_keep_the_query_and_the_method(servers):
    live, _, ids = servers
    r = httpx.get(live.url + "arena?x=1", timeout=30)
    assert r.status_code == 307 and r.headers["location"] == "/arena/?x=1"
    r = httpx.get(f"{live.url}listen/{ids['TEST_ID']}/?PROLIFIC_PID=p1", timeout=30)
    assert r.status_code == 307
    assert r.headers["location"] == f"/listen/{ids['TEST_ID']}?PROLIFIC_PID=p1"
    r = httpx.post(live.url + "ll/admin/login/", data={"password": PASSWORD}, timeout=30)
    assert r.status_code == 307 and r.headers["location"] == "/ll/admin/login"
    r = httpx.get(live.url + "no/such/page", timeout=30)
    assert r.status_code == 404  # only real pages get a twin


def test_documented_websockets_accept_a_handshake(servers):
    from websockets.sync.client import connect

    live, api_url, _ = servers
    assert documented_paths().keys() >= WEBSOCKETS
    for path in sorted(WEBSOCKETS):
        base = api_url if path.startswith("/v1/") else live.url
        url = base.replace("http://", "ws://").rstrip("/") + path
        with connect(url, open_timeout=30) as ws:
            assert ws.protocol.state.name == "OPEN", path


# ------------------------------------------------------------------ commands that paste

FENCE_RE = re.compile(r"```(?:sh|bash)\n(.*?)```", re.S)
SPAN_RE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def shell_lines() -> list[tuple[str, str]]:
    """(page, line) for every line of every sh block (continuations joined, comments cut)."""
    out = []
    for p in PAGES:
        for block in FENCE_RE.findall(p.read_text()):
            block = re.sub(r"\\\n\s*", " ", block)
            for ln in block.splitlines():
                ln = re.split(r"\s{2,}#", ln.strip())[0].strip()
                if ln:
                    out.append((p.name, ln))
    return out


def inline_commands() -> list[tuple[str, str]]:
    """(page, span) for inline code that is a `listenlab …` command line."""
    out = []
    for p in PAGES:
        for span in SPAN_RE.findall(p.read_text()):
            s = span.strip()
            if re.match(r"(\.venv/bin/)?listenlab \S", s):
                out.append((p.name, s))
    return out


def listenlab_argvs(line: str) -> list[list[str]]:
    """The argument lists of the `listenlab` calls on a shell line (also inside `sh -c '…'`).

    Documentation shorthand is read as meant: `[--json]` is an optional flag (kept), `a|b`
    outside quotes is a choice (the first is taken, as the shell would end the command there).
    """
    lex = shlex.shlex(line.replace("[", "").replace("]", ""), posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    toks = list(lex)
    argvs = []
    for i, t in enumerate(toks):
        if " " in t and "listenlab " in t:  # the script of `sh -c '…'`
            argvs += listenlab_argvs(t)
        elif t.endswith("/listenlab") or (t == "listenlab" and command_position(toks, i)):
            argv = []
            for a in toks[i + 1 :]:
                if a in {"&&", "||", "|", ";", ">", ">>", "&"}:
                    break
                argv.append(a)
            argvs.append(argv)
    return argvs


def command_position(toks: list[str], i: int) -> bool:
    """Whether token ``i`` is where a command starts (not `docker run … listenlab`)."""
    before = [t for t in toks[:i] if not re.match(r"^[A-Z_][A-Z0-9_]*=", t)]  # VAR=x cmd
    return not before or before[-1] in {"&&", "||", "|", ";", "$(command", "sudo"}


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """Every `listenlab` call in the sh blocks, and every inline one with arguments (a bare
    `listenlab say` in a sentence names the command; it is not a line to paste)."""
    out = [(pg, ln, argv) for pg, ln in shell_lines() for argv in listenlab_argvs(ln)]
    for page, span in inline_commands():
        out += [(page, span, argv) for argv in listenlab_argvs(span) if len(argv) > 1]
    return out


def test_every_documented_listenlab_command_parses_with_the_real_parser(capsys):
    cmds = documented_commands()
    subcommands = {argv[0] for _, _, argv in cmds if argv}
    assert {"serve", "say", "probe", "api", "test", "analyze", "report", "export"} <= subcommands
    parser = build_parser()
    bad = []
    for page, line, argv in cmds:
        try:
            parser.parse_args(argv)
        except SystemExit:
            bad.append(f"{page}: {line}\n    {capsys.readouterr().err.strip().splitlines()[-1]}")
    assert bad == [], "\n".join(bad)


def test_the_parser_check_can_fail():
    """A misspelt option in a documented line is caught (the check above is not vacuous)."""
    parser = build_parser()
    (argv,) = listenlab_argvs(".venv/bin/listenlab say 'Hi.' --bakend piper")
    with pytest.raises(SystemExit):
        parser.parse_args(argv)


def unquoted(line: str) -> str:
    """The line with its quoted parts removed (what the shell would glob or split)."""
    return re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "", line)


def test_every_spec_with_a_question_mark_or_ampersand_is_quoted():
    bad = []
    for page, line in shell_lines() + inline_commands():
        rest = unquoted(line).replace("&&", "")
        if "?" in rest or "&" in rest:
            bad.append(f"{page}: {line}")
    assert bad == [], "quote these specs ('piper?profile=…'):\n" + "\n".join(bad)
    assert unquoted("listenlab serve --backend piper?profile=qwen3-tts") != ""  # not vacuous
    assert "?" in unquoted("listenlab serve --backend qwen=piper?profile=qwen3-tts")
    assert "?" not in unquoted("listenlab serve --backend 'qwen=piper?profile=qwen3-tts'")


def test_no_bare_sudo_in_pasted_lines():
    """A root shell or a container has no sudo: `$(command -v sudo)` works in both."""
    bad = [f"{p}: {ln}" for p, ln in shell_lines() if re.search(r"(^|[;&|]\s*)sudo\s", ln)]
    assert bad == []


def test_readme_links_reach_the_manual():
    """README.md is outside the MkDocs site, so `mkdocs build --strict` does not check it."""
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [ln for ln in links if not re.match(r"[a-z]+:", ln)]
    assert len(local) >= 10
    assert [ln for ln in local if not (ROOT / ln).exists()] == []
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f": {page.name}" in nav, f"{page.name} is not in mkdocs.yml's nav"


def test_slash_twins_keep_methods_and_never_shadow_a_real_route():
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    from app.web.slashes import ALL_METHODS, slash_twins

    async def ok(_request):
        return PlainTextResponse("ok")

    routes = [
        Route("/a", ok, methods=["POST"]),
        Route("/a", ok, methods=["GET"]),
        Route("/b", ok),
        Route("/b/", ok),  # both forms are real: no twin
        Route("/c/", ok, methods=["GET"]),  # ends in a slash: /c redirects to it
        Mount("/m", app=ok),
        Mount("", app=ok),  # the catch-all itself gets no twin
    ]
    twins = {r.path: r.methods for r in slash_twins(routes)}
    assert twins == {"/a/": {"GET", "HEAD", "POST"}, "/c": {"GET", "HEAD"}, "/m": set(ALL_METHODS)}
    adds = {r.path: r.endpoint.__name__ for r in slash_twins(routes)}
    assert adds == {"/a/": "_strip_slash", "/c": "_add_slash", "/m": "_add_slash"}


def test_screenshots_are_referenced_small_and_retakeable():
    """Every docs/img PNG is shown on a page, is ~1000 px wide and small, and is one that
    docs/screenshots.py writes (so it can be retaken, not only kept)."""
    from PIL import Image

    shown = set(re.findall(r"\]\(img/([^)]+\.png)\)", page_text()))
    script = (ROOT / "docs" / "screenshots.py").read_text()
    pngs = sorted((ROOT / "docs" / "img").glob("*.png"))
    assert {p.name for p in pngs} == shown
    for p in pngs:
        with Image.open(p) as img:
            assert img.width <= 1000 and img.height <= 1500, p.name
        assert p.stat().st_size < 200_000, p.name
        assert f'"{p.name}"' in script, f"{p.name} is not written by docs/screenshots.py"


# ------------------------------------------------------------------ limits read from the code


def limit_claims() -> list[tuple[str, str]]:
    """(page, sentence) for each limit the pages state, built from the code's own numbers, so
    a limit changed in one place and not the other fails here."""
    from app.api.batch import MAX_ITEMS
    from app.api.limits import BATCH_SECONDS_PER_CHAR, ApiLimits

    lim = ApiLimits()
    batch = (
        f"{MAX_ITEMS} items; {lim.batch_chars:,} characters in all; {lim.batch_samples:,} "
        f"output samples in all (estimated at {BATCH_SECONDS_PER_CHAR} s a character"
    )
    from app.config import HF_PARENT, NOT_PERSISTENT_NOTE, PERSISTENT_NOTE
    from app.server import ADMIN_PAGES, ADMIN_PATHS
    from app.web.inputs import JSON_BODY_BYTES, MAX_JSON_DEPTH

    # an admin route as the page names it: a prefix with "…", a route and its subpaths once
    admin_paths = [
        f"`{p}…`" if p.endswith("/") else f"`{p}`"
        for p in ADMIN_PATHS
        if p.rstrip("/") == p or p.rstrip("/") not in ADMIN_PATHS
    ]
    admin_pages = ", ".join(f"`{p}`" for p in ADMIN_PAGES if not p.endswith("/"))
    return [
        ("security.md", batch),
        ("security.md", f"frame-ancestors 'self' {HF_PARENT} https://$SPACE_HOST"),
        ("security.md", f"admin route ({', '.join(admin_paths)})"),
        ("security.md", f"opening an admin page ({admin_pages})"),
        ("security.md", f"`/ll/…` JSON {JSON_BODY_BYTES:,} bytes ({JSON_BODY_BYTES // 1024} KiB"),
        ("security.md", f"nesting ≤ {MAX_JSON_DEPTH} levels"),
        ("deploy.md", PERSISTENT_NOTE),
        ("deploy.md", NOT_PERSISTENT_NOTE),
        ("api.md", f"`input` together at most {lim.batch_chars:,} characters"),
        ("api.md", f"at most {lim.batch_samples:,} samples"),
        ("api.md", f"estimated at {BATCH_SECONDS_PER_CHAR} s a character"),
    ]


def test_documented_limits_are_the_codes():
    missing = []
    for page, claim in limit_claims():
        text = " ".join((ROOT / "docs" / page).read_text().split())
        if " ".join(claim.split()) not in text:
            missing.append(f"{page}: {claim!r}")
    assert missing == [], "\n".join(missing)


# ------------------------------------------------ #38 item 19: the probe, first sound, a Space


def test_probe_page_names_every_option_the_exit_codes_and_the_api_key(capsys):
    """probe.md against the real parser: every option of ``listenlab probe``, exit 2 on bad
    arguments (as the command's own help says), and the API-key variable of app/config."""
    from app.config import ENV

    page = (ROOT / "docs/probe.md").read_text()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["probe", "--help"])
    usage = " ".join(capsys.readouterr().out.split())
    options = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", usage)) - {"-h", "--help"}
    assert {"--voice", "--json", "--seed", "-o", "--out"} <= options
    assert sorted(o for o in options if f"`{o}" not in page) == []
    assert "2 on bad arguments" in usage
    assert "exits 0 (pass), 1 (fail) or 2 (bad arguments" in " ".join(page.split())
    assert "LISTENLAB_VLLM_API_KEY" in {e.name for e in ENV}
    assert "`LISTENLAB_VLLM_API_KEY=KEY`" in page


def test_probe_exits_2_on_bad_arguments_as_the_page_says():
    from tests.support.remote_util import cli

    for bad in (["--concurrency", "0"], ["--threshold", "nope=1"], ["--prompts", "/nonexistent"]):
        p = cli("probe", "--backend", "piper", *bad, check=False)
        assert p.returncode == 2, (bad, p.stderr)
        assert "error:" in p.stderr and "Traceback" not in p.stderr


def test_probe_json_keys_and_format_are_the_pages():
    from evaluation.probe import ProbeResult, Thresholds

    doc = ProbeResult("piper", "2026-01-01T00:00:00Z", [], Thresholds(), [1]).to_dict()
    page = " ".join((ROOT / "docs/probe.md").read_text().split())
    assert f"its `format` is {doc['format']}" in page
    listed = page[page.index("Its keys:") : page.index("## The three layers")]
    assert re.findall(r"`(\w+)`", listed) == list(doc)


def test_readme_first_sound_is_the_benchmark_s_click_to_first_sound():
    """The README's first-sound figure is the median the browser benchmark wrote, and it says
    what was measured (click to first sound), not a round guess."""
    import json

    res = json.loads((ROOT / "benchmarks/results/browser_latency.json").read_text())
    ms = round(res["listenlab"]["click_to_first_sound_ms_median"])
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"the first sound comes {ms} ms after the click" in readme
    assert "benchmarks/browser_latency.py" in readme and "~0.1 s" not in readme


def test_install_page_says_a_probe_fail_on_a_loaded_machine_is_expected():
    from evaluation.probe import Thresholds

    page = " ".join((ROOT / "docs/install.md").read_text().split())
    assert "listenlab probe --backend piper" in page
    assert "that is expected" in page
    assert f"`max_stall_ms` ({Thresholds().max_stall_ms:.0f} ms)" in page


def test_security_page_lists_what_a_space_exposes_from_the_code(tmp_path, monkeypatch):
    """The public-Space section: its numbers are the code's, and the `/ll/api/config` row
    names exactly the fields the route returns to a visitor."""
    from fastapi.testclient import TestClient

    from app.playground.routes import HIDDEN_HOST
    from app.server import create_app
    from app.state import DEFAULT_CONCURRENCY
    from backends.audio import MAX_CLIP_BYTES, REF_MAX_SECONDS, REF_MIN_SECONDS
    from backends.base import MAX_TEXT_CHARS

    text = (ROOT / "docs/security.md").read_text()
    section = text[text.index("## What a public Space exposes") :]
    section = " ".join(section[: section.index("\n## ", 5)].split())
    for claim in (
        f"up to {MAX_TEXT_CHARS:,} characters a request",
        f"`--concurrency` (default {DEFAULT_CONCURRENCY})",
        f"clips of at most {MAX_CLIP_BYTES // 2**20} MiB and "
        f"{REF_MIN_SECONDS:g}–{REF_MAX_SECONDS:g} s each",
        f"`vllm-omni+http://{HIDDEN_HOST}?model=…`",
    ):
        assert claim in section, claim
    monkeypatch.setenv("LISTENLAB_ADMIN_PASSWORD", "pw")
    app = create_app({"piper": "piper"}, tmp_path / "db.sqlite", mount_ui=False, warm=False)
    visitor = TestClient(app, client=("203.0.113.9", 5000), base_url="http://localhost")
    cfg = visitor.get("/ll/api/config").json()
    row = section[section.index("| `/ll/api/config` |") : section.index("| `/ll/health` |")]
    fields = set(cfg) | set(cfg["backends"][0])
    named = set(re.findall(r"`(\w+)`", row))
    assert named == fields, named ^ fields


def test_security_page_s_third_round_numbers_are_the_benchmark_s():
    """The #38 table in security.md quotes benchmarks/results/abuse.json's `hardening` block."""
    import json

    block = json.loads((ROOT / "benchmarks/results/abuse.json").read_text())["hardening"]
    ph = {p["phase"]: p for p in block["phases"]}
    b, q, m, f = ph["batch_bomb"], ph["batch_queue"], ph["metrics_paths"], ph["framing"]
    lo, hi = block["loadavg_1m_before_after"]
    page = " ".join((ROOT / "docs/security.md").read_text().split())
    for claim in (
        f"load average {lo}–{hi}",
        f'{b["status"]} in {b["answer_ms"]:.0f} ms ("{b["message"]}")',
        f"server RSS +{b['rss_growth_mb']} MB",
        f"{q['singles_done_before_batch']} of them before the batch ended ({q['batch_s']} s",
        f"{m['series_before']} → {m['series_after']} request series",
        f"{m['scrape_bytes_before']:,} → {m['scrape_bytes_after']:,} bytes",
        f"a {f['snapshot']['own_page_bytes']:,}-byte snapshot",
        f"the admin page says `{f['admin_page_csp']}`",
    ):
        assert claim in page, claim
    assert set(f["snapshot"]["answers"]) == set(f["export"]["answers"]) == {"403"}
    assert b["status"] == 400 and q["singles_answers"] == {"200": 8} and f["host_testserver"] == 403
