"""One remote speech server as the transports see it: where it is, how to sign in, its HTTP
client, what its model card says, and the stream format when a stream does not state it.

Why apart from the backend: every transport (:mod:`.http`, :mod:`.raw`, :mod:`.sse`,
:mod:`.ws`) needs the same connection and the same answer to "what rate is this PCM?"; the
backend (:mod:`.backend`) adds what a *request* needs (rules, voices, capabilities).

The rate of a raw stream comes from the stream (WAV header, WebSocket ``audio.start``), else
the pinned ``sample_rate``, else the server's model card, else the served model's unit
(:func:`backends.vllm_omni.models.table_format`); what was assumed is said on the chunks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections import OrderedDict
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from backends.errors import BackendError, StreamTimeout
from backends.vllm_omni.models import table_format
from backends.vllm_omni.remote.framing import Framer
from backends.vllm_omni.remote.options import RemoteOptions
from backends.vllm_omni.wire import error_message


def strip_credentials(base_url: str) -> tuple[str, tuple[str, str] | None]:
    """``base_url`` without user-info (it appears in error messages and logs), and the
    user-info as ``(user, password)`` for Basic auth."""
    u = urlsplit(base_url)
    if u.username is None and u.password is None:
        return base_url, None
    host = f"[{u.hostname}]" if ":" in (u.hostname or "") else (u.hostname or "")
    netloc = host + (f":{u.port}" if u.port else "")
    basic = (unquote(u.username or ""), unquote(u.password or ""))
    return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment)), basic


USAGE_KEPT = 256
"""Reported usage kept for requests nobody asked about yet (a bound, not a cache)."""


class RemoteServer:
    """The connection to one server (see the module docstring)."""

    def __init__(self, base_url: str, options: RemoteOptions):
        base_url = base_url.rstrip("/")
        if base_url.startswith(("ws://", "wss://")):
            base_url = "http" + base_url[2:]
        self.base_url, self.basic = strip_credentials(base_url)
        self.options = options
        self.card: dict[str, Any] | None = None
        """The served model's ``/v1/models`` entry, once read."""
        self.served_model: str | None = None
        self.usage: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """The token counts the server reported, by request id (taken once; the oldest of
        more than :data:`USAGE_KEPT` are dropped)."""
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def record_usage(self, request_id: str | None, usage: Any) -> None:
        """Keep a request's reported usage until ``listenlab api`` passes it on."""
        if request_id and isinstance(usage, dict):
            self.usage[request_id] = usage
            while len(self.usage) > USAGE_KEPT:
                self.usage.popitem(last=False)

    # -- connection

    def http(self) -> Any:
        """One shared client per server and event loop (a client cannot cross loops)."""
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            o = self.options
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(None, connect=o.connect_timeout, pool=o.connect_timeout),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=8),
                trust_env=False,
                headers=self.auth_headers(),
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()

    def auth_headers(self) -> dict[str, str]:
        """Bearer ``api_key`` (the spec's, or the environment's passed in by the app), else
        the URL's user-info as Basic."""
        if self.options.api_key:
            return {"Authorization": f"Bearer {self.options.api_key}"}
        if self.basic is not None:
            raw = f"{self.basic[0]}:{self.basic[1]}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
        return {}

    def url(self, path: str) -> str:
        return self.base_url + path

    def ws_url(self, path: str) -> str:
        return "ws" + self.base_url[4:] + path

    async def get_json(self, path: str) -> tuple[int, Any]:
        """``(status, JSON)``; an error status comes with the server's message instead."""
        import httpx

        try:
            r = await self.http().get(self.url(path), timeout=self.options.connect_timeout + 10)
        except httpx.TimeoutException as e:
            raise StreamTimeout(f"{self.base_url}{path} did not answer in time ({e!r})") from None
        except httpx.HTTPError as e:
            raise BackendError(f"cannot reach {self.base_url}: {e!r}") from None
        if r.status_code >= 400:
            return r.status_code, error_message(r.content, r.status_code)
        try:
            return r.status_code, r.json()
        except ValueError:
            raise BackendError(
                f"{path} did not return JSON: {r.text[:200]!r}", status=r.status_code
            ) from None

    # -- the served model

    @property
    def model(self) -> str | None:
        """The served model's name: the spec's ``model``, else the server's model card."""
        return self.options.model or self.served_model

    @property
    def listenlab_card(self) -> dict[str, Any]:
        """The card's ``listenlab`` block (a ``listenlab api`` server's capabilities), or {}."""
        return (self.card or {}).get("listenlab") or {}

    async def read_card(self) -> None:
        """Read ``/v1/models``: the entry of the spec's model, else the first one."""
        status, d = await self.get_json("/v1/models")
        if status >= 400 or not isinstance(d, dict):
            return
        data = [m for m in d.get("data") or [] if isinstance(m, dict)]
        want = self.options.model
        card = next((m for m in data if m.get("id") == want), None) if want else None
        card = card or (data[0] if data else None)
        if card:
            self.card = card
            self.served_model = str(card.get("id") or "") or None

    def native_rate(self) -> int | None:
        """The served model's own rate: the card's, else its unit's."""
        fmt = table_format(self.model)
        return self.listenlab_card.get("sample_rate") or (fmt[0] if fmt else None)

    # -- the stream's format

    def check_rate(self, rate: int) -> None:
        """A stated rate must be the pinned one (if one was pinned)."""
        pinned = self.options.sample_rate
        if pinned and rate != pinned:
            raise BackendError(
                f"the server's WAV header says {rate} Hz but sample_rate={pinned} was requested"
            )

    async def assume_format(self, framer: Framer, what: str, channels: int | None = None) -> None:
        """Set ``framer``'s rate/channels from :meth:`fallback_format`, noting the assumption."""
        framer.sample_rate, framer.channels, framer.assumed = await self.fallback_format(
            what, channels
        )

    async def fallback_format(self, what: str, channels: int | None = None) -> tuple[int, int, str]:
        """Rate/channels when the stream does not state them: pinned, model card, unit.

        Returns ``(rate, channels, note)``; the note says what was assumed and from what.
        """
        o = self.options
        if self.card is None and not o.sample_rate:
            with contextlib.suppress(BackendError):
                await self.read_card()
        model = self.model
        table = table_format(model)
        card = self.listenlab_card
        if channels:
            ch, ch_from = int(channels), "the stream"
        elif card.get("channels"):
            ch, ch_from = int(card["channels"]), "the server's model card"
        elif table:
            ch, ch_from = table[1], f"the model-name table ({model!r})"
        else:
            ch, ch_from = 1, "the default (mono)"
        if o.sample_rate:
            sr, sr_from = o.sample_rate, f"the backend's sample_rate={o.sample_rate} setting"
        elif card.get("sample_rate"):
            sr, sr_from = int(card["sample_rate"]), "the server's model card"
        elif table:
            sr, sr_from = table[0], f"the model-name table ({model!r})"
        else:
            raise BackendError(
                f"the server does not announce the sample rate of {what} and model "
                f"{model or '(unnamed)'!r} is not in the rate table; "
                "use format=wav or pin sample_rate=…"
            )
        note = f"{what} does not state its format: {sr} Hz assumed from {sr_from}" + (
            "" if ch_from == "the stream" else f", {ch} channel(s) from {ch_from}"
        )
        return sr, ch, note


__all__ = ["RemoteServer", "strip_credentials"]
