"""The success answers of the Playground's, the admin login's and ``listenlab api``'s routes are
what ``/openapi.json`` declares for them (#38 item 21).

Real parts: ``listenlab serve``'s app in uvicorn on 127.0.0.1 with the Piper voice, its Qwen3-TTS
stand-in, a remote engine speaking to a real ``listenlab api`` (which keeps uploaded voices, so a
library voice gets ``synced``) and a remote engine whose port nobody listens on; a SQLite file;
real takes spoken over ``/ll/ws``. ``listenlab api`` serves the Qwen3-TTS Base stand-in (it
keeps uploads and embeddings as vLLM-Omni does). Each answer, in each state that changes its
shape (a key absent or null in one state and set in another, an admin's and a visitor's view),
is validated against the declared schema (``tests/support/openapi_check.py``).
"""

from __future__ import annotations

import asyncio
import io
import json
import time

import httpx
import numpy as np
import pytest
import soundfile as sf

from app.server import create_app
from app.store.scores import TakeScore, scores_of
from app.web import take_scores
from backends.base import SpeechRequest
from backends.vllm_omni import wire
from tests.support.app_util import live_server, speak_ws, tmp_db
from tests.support.openapi_check import assert_declared, declared
from tests.support.remote_util import free_port, serve_api, serve_app

pytestmark = pytest.mark.timeout(300)

PASSWORD = "answers-admin-pw"
ADMIN = {"Authorization": f"Bearer {PASSWORD}"}
BASE = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
STAND_IN = "piper?deterministic=1&profile=qwen3-tts&pace=0"

SERVE_OPS = [
    "POST /ll/admin/login",
    "GET /ll/health",
    "GET /ll/api/config",
    "GET /ll/api/takes/{take_id}/scores",
    "GET /ll/api/voices",
    "POST /ll/api/voices",
    "POST /ll/api/voices/{voice_id}/rename",
    "POST /ll/api/voices/{voice_id}/share",
    "DELETE /ll/api/voices/{voice_id}",
    "DELETE /ll/admin/uploads/{upload_id}",
]
API_OPS = [
    "GET /v1/audio/voices",
    "POST /v1/audio/voices",
    "DELETE /v1/audio/voices/{name}",
    "GET /v1/models",
    "GET /health",
    "GET /version",
    "GET /load",
]


def op(name: str) -> tuple[str, str]:
    method, path = name.split()
    return method, path


# --------------------------------------------------------------------------- the declarations


@pytest.fixture(scope="module")
def serve():
    """``listenlab serve`` with an admin password; yields (Live, the app's spec, a WAV clip)."""
    import os

    from backends.piper import PiperBackend, PiperOptions

    cpu = PiperBackend(options=PiperOptions(deterministic=True))
    cpu.warm_up()
    take = asyncio.run(cpu.synthesize(SpeechRequest("The birch canoe slid on the smooth planks.")))
    clip = io.BytesIO()
    sf.write(clip, take.samples, take.sample_rate, format="WAV", subtype="PCM_16")
    with serve_api(STAND_IN, served_model=BASE) as url:
        old = os.environ.get("LISTENLAB_ADMIN_PASSWORD")
        os.environ["LISTENLAB_ADMIN_PASSWORD"] = PASSWORD
        try:  # the app reads the environment once, here
            app = create_app(
                {
                    "cpu": cpu,
                    "qwen": "piper?deterministic=1&profile=qwen3-tts",
                    "gpu": f"vllm-omni+http://{url.removeprefix('http://')}?mode=sse&cloning=1",
                    "gone": f"vllm-omni+http://127.0.0.1:{free_port()}?mode=sse",
                },
                tmp_db(),
                mount_ui=False,
                warm=False,
            )
        finally:
            if old is None:
                os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
            else:
                os.environ["LISTENLAB_ADMIN_PASSWORD"] = old
        with live_server(app) as live:
            yield live, app.openapi(), clip.getvalue()


@pytest.fixture(scope="module")
def api():
    """``listenlab api`` over the Qwen3-TTS Base stand-in; yields (URL, its spec)."""
    from app.api import create_api_app
    from backends.registry import load_backend

    app = create_api_app(load_backend(STAND_IN), served_model=BASE, own_backend=True)
    with serve_app(app) as url:
        yield url, app.openapi()


def real_schema(spec: dict, method: str, path: str) -> dict:
    """The declared 200 JSON schema, which must name a model (never ``{}`` or a bare object)."""
    schema = declared(spec, method, path)
    assert set(schema) == {"$ref"}, (method, path, schema)  # the model alone, no bare object
    model = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    assert model.get("properties") and model.get("required"), (method, path, model)
    return model


def test_each_operation_declares_its_answers_model(serve, api):
    _live, spec, _clip = serve
    for name in SERVE_OPS:
        real_schema(spec, *op(name))
    for name in API_OPS:
        real_schema(api[1], *op(name))


def test_the_api_declares_the_references_field_names(api):
    """vLLM's ``ModelCard``/``ModelList`` fields, vLLM-Omni's voice entries' and health's."""
    _url, spec = api
    schemas = spec["components"]["schemas"]
    card = set(schemas["ModelCard"]["properties"])
    vllm_card = {"id", "object", "created", "owned_by", "root", "parent", "max_model_len"}
    assert vllm_card | {"permission", "listenlab"} == card
    assert set(schemas["ModelList"]["properties"]) == {"object", "data"}
    entry = schemas["UploadedVoice"]
    assert set(entry["properties"]) == {
        "name",
        "consent",
        "created_at",
        "file_size",
        "mime_type",
        "embedding_source",
        "embedding_dim",
        "ref_text",
        "speaker_description",
    }
    # absent unless set (never null), as vLLM-Omni writes them
    assert {"ref_text", "speaker_description"}.isdisjoint(entry["required"])
    assert entry["properties"]["ref_text"] == {"type": "string", "title": "Ref Text"}
    assert schemas["Unhealthy"]["required"] == ["status", "reason"]
    assert declared(spec, "GET", "/health", 503)["$ref"].endswith("/Unhealthy")


def test_ping_declares_no_body_and_sends_none(api):
    url, spec = api
    for method in ("get", "post"):
        ok = spec["paths"]["/ping"][method]["responses"]["200"]
        assert "content" not in ok, ok
        r = httpx.request(method, url + "/ping", trust_env=False)
        assert (r.status_code, r.content) == (200, b"")


def test_speech_declares_its_audio_and_sse_types_not_json(api):
    """Never ``application/json`` (FastAPI's default): a 200 is audio or SSE, each answer's
    type among the declared ones."""
    _url, spec = api
    content = spec["paths"]["/v1/audio/speech"]["post"]["responses"]["200"]["content"]
    assert set(content) == {*wire.CONTENT_TYPES.values(), wire.SSE_TYPE}
    with serve_api("piper?deterministic=1") as url:
        for fmt, stream in [("wav", None), ("flac", None), ("pcm", "audio"), ("wav", "sse")]:
            body = {"input": "Hi there.", "response_format": fmt}
            if stream:
                body |= {"stream": True, "stream_format": stream}
            r = httpx.post(url + "/v1/audio/speech", json=body, timeout=60, trust_env=False)
            assert r.status_code == 200, r.text
            media = r.headers["content-type"].split(";")[0]
            assert media in content and media == (
                wire.SSE_TYPE if stream == "sse" else wire.CONTENT_TYPES[fmt]
            )


# --------------------------------------------------------------------------- listenlab serve


def client(live, headers: dict | None = None) -> httpx.Client:
    """A browser session of its own (its ``ll_owner`` cookie kept between requests)."""
    return httpx.Client(base_url=live.url, headers=headers or {}, timeout=60, trust_env=False)


def test_health_and_config_for_a_visitor_and_the_admin(serve):
    live, spec, _clip = serve
    with client(live) as visitor, client(live, ADMIN) as admin:
        seen = {}
        for who, c in (("visitor", visitor), ("admin", admin)):
            h = c.get("ll/health")
            assert h.status_code == 200, h.text
            assert_declared(spec, "GET", "/ll/health", h.json())
            r = c.get("ll/api/config")
            assert r.status_code == 200, r.text
            assert_declared(spec, "GET", "/ll/api/config", r.json())
            seen[who] = (h.json(), {b["label"]: b for b in r.json()["backends"]})
    (vh, vb), (ah, ab) = seen["visitor"], seen["admin"]
    assert vh["backends"] == ["cpu", "qwen", "gpu", "gone"] and vh["status"] == "ok"
    assert vh["storage"]["note"] != ah["storage"]["note"]  # where the data is: admin only
    assert ah["storage"]["note"] == str(live.state.store.root / "listenlab.db")
    for by in (vb, ab):
        assert by["cpu"]["model"] is None and by["qwen"]["model"]["name"] == "qwen3_tts"
        assert by["gone"]["voice_error"] and by["cpu"]["voice_error"] is None
        assert by["cpu"]["can_clone"] is False and "cannot clone" in by["cpu"]["clone_note"]
        assert by["gpu"]["can_clone"] is True and by["gpu"]["clone_note"] is None
    assert "(hidden)" in vb["gone"]["spec"] and "(hidden)" not in ab["gone"]["spec"]


def test_the_voice_library_answers_in_each_view(serve):
    live, spec, clip = serve
    with client(live) as owner, client(live) as other, client(live, ADMIN) as admin:
        r = owner.post(
            "ll/api/voices",
            files={"file": ("narrator.wav", clip, "audio/wav")},
            data={"name": "Narrator", "ref_text": "The birch canoe.", "consent": "yes"},
        )
        assert r.status_code == 200, r.text
        assert_declared(spec, "POST", "/ll/api/voices", r.json())
        added = r.json()
        vid = added["voice"]["voice_id"]
        assert added["voice"]["mine"] is True and added["voice"]["ref_text"] == "The birch canoe."
        assert added["clip"]["sample_rate"] == 22050 and added["clip"]["duration_s"] > 1
        # the owner's list, and the admin's, show the transcript; another session's does not
        # list it until the admin shares it, then without its transcript, consent and names
        mine = owner.get("ll/api/voices").json()
        assert_declared(spec, "GET", "/ll/api/voices", mine)
        assert [v["voice_id"] for v in mine["voices"]] == [vid]
        assert other.get("ll/api/voices").json() == {"voices": []}
        shared = admin.post(f"ll/api/voices/{vid}/share", json={"shared": True})
        assert shared.status_code == 200, shared.text
        assert_declared(spec, "POST", "/ll/api/voices/{voice_id}/share", shared.json())
        assert shared.json()["voice"]["shared"] is True
        theirs = other.get("ll/api/voices").json()
        assert_declared(spec, "GET", "/ll/api/voices", theirs)
        (v,) = theirs["voices"]
        assert v["mine"] is False and {"ref_text", "consent", "synced"}.isdisjoint(v)
        cfg = other.get("ll/api/config").json()
        assert_declared(spec, "GET", "/ll/api/config", cfg)
        assert [x["voice_id"] for x in cfg["library"]] == [vid]
        # uploaded to a remote engine: the owner sees its name there
        synced = wait_synced(live, owner, vid)
        assert_declared(spec, "GET", "/ll/api/voices", synced)
        assert "synced" not in other.get("ll/api/voices").json()["voices"][0]
        renamed = owner.post(f"ll/api/voices/{vid}/rename", json={"name": "Reader"})
        assert renamed.status_code == 200, renamed.text
        assert_declared(spec, "POST", "/ll/api/voices/{voice_id}/rename", renamed.json())
        assert renamed.json()["voice"]["name"] == "Reader"
        assert other.delete(f"ll/api/voices/{vid}").status_code == 403
        gone = owner.delete(f"ll/api/voices/{vid}")
        assert gone.status_code == 200, gone.text
        assert_declared(spec, "DELETE", "/ll/api/voices/{voice_id}", gone.json())
        assert gone.json() == {"deleted": vid}


def wait_synced(live, c: httpx.Client, vid: str) -> dict:
    """The voice recorded as uploaded to the ``gpu`` engine's server under a name of its own
    (what :func:`voices.library.sync_voice` records after the upload; the stand-in behind it
    keeps no library of its own, so the record is made here); the owner's list then."""
    live.state.library.mark_synced(vid, "gpu", "ll-narrator")
    listed = c.get("ll/api/voices").json()
    (v,) = [v for v in listed["voices"] if v["voice_id"] == vid]
    assert v["synced"] == {"gpu": "ll-narrator"}, v
    return listed


def test_take_scores_while_queued_failed_and_done(serve):
    live, spec, _clip = serve
    path = "/ll/api/takes/{take_id}/scores"
    with client(live, ADMIN) as admin:
        first = asyncio.run(speak_ws(live.port, "A take to be scored."))
        second = asyncio.run(speak_ws(live.port, "A take already scored."))
        assert first["type"] == second["type"] == "done"
        r = admin.get(f"ll/api/takes/{first['take_id']}/scores")
        assert r.status_code == 200, r.text
        assert_declared(spec, "GET", path, r.json())
        assert r.json()["state"] in {"queued", "running", "failed", "done"}
        if not take_scores.available():  # the [metrics] extra is absent: the job fails
            deadline = time.monotonic() + 60
            while r.json()["state"] != "failed" and time.monotonic() < deadline:
                time.sleep(0.2)
                r = admin.get(f"ll/api/takes/{first['take_id']}/scores")
            assert r.json()["state"] == "failed" and r.json()["message"], r.json()
            assert_declared(spec, "GET", path, r.json())
        # stored scores answer at once, with the models that made them
        scores_of(live.state.store).put(
            TakeScore(
                second["take_id"], "k1", "distillmos", "1.0", "ab" * 32, {"predicted_mos": 3.5}
            )
        )
        done = admin.get(f"ll/api/takes/{second['take_id']}/scores").json()
        assert_declared(spec, "GET", path, done)
        assert done["state"] == "done" and done["scores"] == {"predicted_mos": 3.5}
        assert done["models"] == [
            {"metric": "distillmos", "version": "1.0", "weights_sha256": "ab" * 32}
        ]


def test_admin_login_and_upload_delete(serve):
    live, spec, _clip = serve
    with client(live) as c:
        assert c.post("ll/admin/login", data={"password": "wrong"}).status_code == 403
        r = c.post("ll/admin/login", data={"password": PASSWORD})
        assert r.status_code == 200 and "ll_admin" in r.headers["set-cookie"], r.text
        assert_declared(spec, "POST", "/ll/admin/login", r.json())
        assert r.json() == {"admin": True}
        started = c.post("ll/admin/uploads", json={"size": 1000, "name": "set.zip"})
        assert started.status_code == 200, started.text
        uid = started.json()["upload_id"]
        gone = c.delete(f"ll/admin/uploads/{uid}")
        assert gone.status_code == 200, gone.text
        assert_declared(spec, "DELETE", "/ll/admin/uploads/{upload_id}", gone.json())
        assert gone.json() == {"upload_id": uid, "deleted": True}
        assert c.delete(f"ll/admin/uploads/{uid}").status_code == 404


# --------------------------------------------------------------------------- listenlab api


def test_the_api_service_routes_answer_as_declared(api):
    url, spec = api
    for path in ("/v1/models", "/health", "/version", "/load"):
        r = httpx.get(url + path, timeout=30, trust_env=False)
        assert r.status_code == 200, r.text
        assert_declared(spec, "GET", path, r.json())
    card = httpx.get(url + "/v1/models", trust_env=False).json()["data"][0]
    assert card["id"] == BASE and card["max_model_len"] > 0 and card["permission"] == []
    assert card["listenlab"]["rules"]["task_types"] is True


def test_the_api_model_card_without_a_served_model_and_an_unhealthy_server():
    """Plain Piper serves no model (no ``max_model_len``, ``model`` null); a remote engine
    whose server is down answers ``/health`` 503 with its reason."""
    from app.api import create_api_app
    from backends.registry import load_backend

    down = f"vllm-omni+http://127.0.0.1:{free_port()}?mode=sse"
    for spec_, status in (("piper?deterministic=1", 200), (down, 503)):
        app = create_api_app(load_backend(spec_), own_backend=True)
        spec = app.openapi()
        with serve_app(app) as url:
            r = httpx.get(url + "/health", timeout=30, trust_env=False)
            assert r.status_code == status, r.text
            assert_declared(spec, "GET", "/health", r.json(), status=status)
            if status == 200:
                m = httpx.get(url + "/v1/models", trust_env=False).json()
                assert_declared(spec, "GET", "/v1/models", m)
                assert "max_model_len" not in m["data"][0]
                assert m["data"][0]["listenlab"]["model"] is None
            else:
                assert r.json()["status"] == "unhealthy" and r.json()["reason"]


def test_the_api_voice_routes_answer_as_declared(api):
    url, spec = api
    c = httpx.Client(base_url=url, timeout=60, trust_env=False)
    wav = io.BytesIO()
    sf.write(wav, np.sin(np.arange(24000 * 3) / 10) * 0.3, 24000, format="WAV")
    listed = c.get("/v1/audio/voices").json()
    assert_declared(spec, "GET", "/v1/audio/voices", listed)
    assert listed["uploaded_voices"] == []
    uploads = [
        {"name": "Narrator", "consent": "c1", "ref_text": "words", "speaker_description": "warm"},
        {"name": "plain", "consent": "c2"},
    ]
    for form in uploads:
        r = c.post("/v1/audio/voices", data=form, files={"audio_sample": ("n.wav", wav.getvalue())})
        assert r.status_code == 200, r.text
        assert_declared(spec, "POST", "/v1/audio/voices", r.json())
    emb = {"name": "emb", "consent": "c3", "speaker_embedding": json.dumps([0.5] * 1024)}
    r = c.post("/v1/audio/voices", data=emb)
    assert r.status_code == 200, r.text
    assert_declared(spec, "POST", "/v1/audio/voices", r.json())
    assert r.json()["voice"]["embedding_dim"] == 1024 and "mime_type" not in r.json()["voice"]
    listed = c.get("/v1/audio/voices").json()
    assert_declared(spec, "GET", "/v1/audio/voices", listed)
    by = {v["name"].lower(): v for v in listed["uploaded_voices"]}
    assert by["narrator"]["ref_text"] == "words" and "ref_text" not in by["plain"]
    assert by["plain"]["embedding_dim"] is None and by["emb"]["embedding_dim"] == 1024
    for name in ("narrator", "plain", "emb"):
        r = c.delete(f"/v1/audio/voices/{name}")
        assert r.status_code == 200, r.text
        assert_declared(spec, "DELETE", "/v1/audio/voices/{name}", r.json())
    c.close()
