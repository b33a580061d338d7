"""``GET /metrics`` of ``listenlab api`` labels requests by route template, so made-up paths
cannot grow the scrape (issue #38, item 2). Real uvicorn on 127.0.0.1, real httpx."""

from __future__ import annotations

import httpx
import pytest

from app.api import create_api_app
from tests.support.remote_util import serve_app

pytestmark = pytest.mark.timeout(120)

REQUESTS = "listenlab_api_requests_total{"


def series(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(REQUESTS)]


def test_made_up_paths_share_one_series(piper_det):
    with serve_app(create_api_app(piper_det)) as url, httpx.Client(trust_env=False) as c:
        c.get(url + "/v1/models")
        before = c.get(url + "/metrics").text
        assert c.get(f"{url}/made/up/first").status_code == 404
        assert c.delete(f"{url}/v1/audio/voices/first").status_code == 404
        once = c.get(url + "/metrics").text  # every series these answers add exists now
        for i in range(599):
            assert c.get(f"{url}/made/up/{i}").status_code == 404
        for name in ("alice", "bob"):  # a real route with a parameter
            assert c.delete(f"{url}/v1/audio/voices/{name}").status_code == 404
        after = c.get(url + "/metrics").text
    print(f"scrape {len(before)} -> {len(once)} -> {len(after)} bytes")
    assert 'route="unmatched",status="404"} 600.0' in after
    assert 'route="/v1/audio/voices/{name}",status="404"} 3.0' in after
    assert 'http_requests_total{handler="none",method="GET",status="4xx"} 600.0' in after
    assert not any("/made/up" in s or "alice" in s for s in after.splitlines())
    assert len(series(after)) - len(series(before)) == 3  # unmatched, voices/{name}, /metrics
    # 600 more made-up paths only change numbers (the scrape went from 2 KB to 1.5 MB)
    assert len(after.splitlines()) == len(once.splitlines())
    assert len(after) < len(once) + 300
