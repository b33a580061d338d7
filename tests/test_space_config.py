"""What a Space is told by this repository, checked against what the app and CI do (issue #38,
item 15): the README's front matter turns Hugging Face login on, the docs say what each key
does, the app reads the variable Hugging Face sets for it, and ``.ci/image`` runs on a fresh
machine (package lists first, its own Python environment, a log of its own)."""

from __future__ import annotations

import re
from pathlib import Path

from app.config import WebSettings
from app.web.identity import hf_login_configured

ROOT = Path(__file__).resolve().parents[1]


def front_matter() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    assert text.startswith("---\n")
    block = text[4 : text.index("\n---\n", 4)]
    return dict(line.split(": ", 1) for line in block.splitlines())


def test_the_readme_turns_on_hugging_face_login_and_the_docs_say_so():
    meta = front_matter()
    assert meta == {
        "title": "listenlab",
        "sdk": "docker",
        "app_port": "7860",
        "suggested_hardware": "cpu-basic",
        "hf_oauth": "true",
    }
    deploy = " ".join((ROOT / "docs" / "deploy.md").read_text().split())
    for key, value in meta.items():
        if key != "title":
            assert f"`{key}: {value}`" in deploy, key
    assert "EXPOSE 7860" in (ROOT / "Dockerfile").read_text()


def test_the_app_reads_what_hf_oauth_sets():
    """Hugging Face sets OAUTH_CLIENT_ID (and its secret) on a Space with ``hf_oauth: true``."""
    on = WebSettings.from_env({"OAUTH_CLIENT_ID": "id", "OAUTH_CLIENT_SECRET": "s"})
    assert hf_login_configured(on) and on.hf_client_secret == "s"
    assert not hf_login_configured(WebSettings.from_env({}))


def test_ci_image_runs_on_a_fresh_machine():
    script = (ROOT / ".ci" / "image").read_text()
    lines = [ln.strip() for ln in script.splitlines() if not ln.strip().startswith("#")]
    update = next(i for i, ln in enumerate(lines) if ln.startswith("apt-get update"))
    install = next(i for i, ln in enumerate(lines) if ln.startswith("apt-get install"))
    assert update < install
    assert not re.search(r"/tmp/[\w.-]+", "\n".join(lines))  # no fixed path in /tmp
    assert '"$PYTHON" -m pytest' in script and "python3 -m venv .venv" in script
    assert "\n.venv/bin/python -m pytest" not in script
