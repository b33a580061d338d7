"""Spec strings -> backends.

A spec names an engine and its settings in one string, so the CLI, the app and the tests can all
say which system they mean:

* ``piper`` / ``piper?voice=joe&speed=1.1&deterministic=1``
* ``vllm-omni+http://host:8000?model=Qwen/Qwen3-TTS&mode=sse``
* ``vllm-omni?model=/models/qwen3-tts`` (embedded ``AsyncOmni``, GPU only)
* any of them plus ``profile=qwen3-tts`` (a wire profile wrapper)

Each engine file registers itself with :func:`register`; the registry imports every module of
the ``backends`` package on first use, so adding an engine touches one file.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from backends.base import Backend, Capabilities, Voice
from backends.errors import InvalidRequest, UnknownBackend
from backends.settings import spec_defaults

_ENGINES: dict[str, type[Backend]] = {}
_WRAPPERS: dict[str, tuple[Callable[[Backend, dict[str, str]], Backend], frozenset[str]]] = {}
_DISCOVERED: list[bool] = []  # non-empty once every module of the package was imported
_SPEC_RE = re.compile(
    r"^(?P<name>[a-z0-9][a-z0-9_-]*)(?:\+(?P<url>(?:https?|wss?)://[^?]*))?(?:\?(?P<query>.*))?$"
)


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator: make ``cls`` reachable by its ``name`` in spec strings."""
    _ENGINES[cls.name] = cls
    return cls


def register_wrapper(
    trigger: str, factory: Callable[[Backend, dict[str, str]], Backend], consumes: set[str]
) -> None:
    """A wrapper applies to any engine when ``trigger`` is among the spec's parameters.

    ``consumes`` are the parameter names the wrapper owns; they are not passed to the engine.
    """
    _WRAPPERS[trigger] = (factory, frozenset(consumes) | {trigger})


class WrapperBackend(Backend):
    """A backend around ``inner`` that a spec parameter (``trigger``) adds to any engine.

    It is not an engine of its own (no spec names it), and it passes warm-up, voices and closing
    through to ``inner``; subclasses say what they change.
    """

    trigger: ClassVar[str]
    example: ClassVar[str]
    """A spec that uses the wrapper (shown when someone names it as an engine)."""
    inner: Backend

    @classmethod
    def from_params(cls, params: dict[str, str], target: str | None = None) -> Backend:
        raise InvalidRequest(
            f"{cls.trigger} is a wrapper, not an engine: add it to a backend spec, "
            f"e.g. {cls.example!r}"
        )

    def trigger_value(self) -> str:
        """The ``trigger`` parameter's value, for :meth:`describe`."""
        raise NotImplementedError

    def describe(self) -> str:
        inner = self.inner.describe()
        return (
            self.spec
            or f"{inner}{'&' if '?' in inner else '?'}{self.trigger}={self.trigger_value()}"
        )

    @property
    def loads_model(self) -> bool:
        return self.inner.loads_model

    def warm_up(self) -> None:
        """Warm the inner voice (``listenlab api`` calls this before serving)."""
        self.inner.warm_up()

    async def start(self) -> None:
        await self.inner.start()

    async def refresh(self) -> Capabilities:
        await self.inner.refresh()
        return self.capabilities

    async def voices(self) -> list[Voice]:
        return await self.inner.voices()

    def usage(self, request_id: str) -> dict[str, Any] | None:
        return self.inner.usage(request_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


ENGINE_PACKAGES = {"vllm_omni": ("embedded", "remote.backend")}
"""Engine rooms that are packages: the modules in them that register an engine (the rest of a
package, e.g. vLLM-Omni's per-model adapters and wire formats, are helpers of an engine)."""


def _discover() -> None:
    import backends

    for mod in pkgutil.iter_modules(backends.__path__):
        if mod.name in {"base", "registry", "errors", "settings"} or mod.name.startswith("_"):
            continue
        if mod.ispkg:
            for sub in ENGINE_PACKAGES.get(mod.name, ()):
                importlib.import_module(f"backends.{mod.name}.{sub}")
        else:
            importlib.import_module(f"backends.{mod.name}")


@dataclass(frozen=True)
class BackendSpec:
    name: str
    target: str | None = None
    params: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Registry key: remote engines are keyed ``name+http``."""
        return f"{self.name}+http" if self.target else self.name

    @classmethod
    def parse(cls, spec: str) -> BackendSpec:
        m = _SPEC_RE.match(spec.strip())
        if not m:
            raise UnknownBackend(
                f"not a backend spec: {spec!r} (expected e.g. 'piper' or 'vllm-omni+http://host:8000')"
            )
        params = dict(parse_qsl(m["query"] or "", keep_blank_values=True))
        return cls(m["name"], m["url"], params)

    def __str__(self) -> str:
        s = self.name + (f"+{self.target}" if self.target else "")
        return s + (f"?{urlencode(self.params)}" if self.params else "")

    def public(self) -> BackendSpec:
        """This spec without secrets: no URL user-info, no ``api_key=``/``token=``/... values.

        What ``describe()``, ``/ll/api/config`` and ``/v1/models`` show is always this, so a
        spec with credentials never reaches a page or a client.
        """
        target = self.target
        if target:
            u = urlsplit(target)
            if u.username is not None or u.password is not None:
                host = u.hostname or ""
                host = f"[{host}]" if ":" in host else host
                netloc = host + (f":{u.port}" if u.port else "")
                target = urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))
        params = {k: v for k, v in self.params.items() if k.lower() not in SECRET_PARAMS}
        return BackendSpec(self.name, target, params)


SECRET_PARAMS = frozenset({"api_key", "apikey", "key", "token", "password", "secret"})
"""Spec parameters whose values are credentials (never published)."""


def known_backends() -> list[str]:
    # Discover once even if some engine was imported directly first: otherwise wrappers such
    # as ``profile=`` (registered by their own modules) would be missing.
    if not _DISCOVERED:
        _discover()
        _DISCOVERED.append(True)
    return sorted(_ENGINES)


def load_backend(spec: str | BackendSpec) -> Backend:
    """Build the backend a spec names. Unknown names raise :class:`UnknownBackend` listing all."""
    parsed = spec if isinstance(spec, BackendSpec) else BackendSpec.parse(spec)
    known = known_backends()
    cls = _ENGINES.get(parsed.key)
    if cls is None:
        raise UnknownBackend(f"unknown backend {parsed.key!r}; known backends: {', '.join(known)}")
    wrappers = [w for t, w in _WRAPPERS.items() if t in parsed.params]
    consumed = set().union(*(c for _, c in wrappers)) if wrappers else set()
    engine_params = {k: v for k, v in parsed.params.items() if k not in consumed}
    backend = cls.from_params({**spec_defaults(parsed.key), **engine_params}, parsed.target)
    backend.spec = str(BackendSpec(parsed.name, parsed.target, engine_params).public())
    for factory, owned in wrappers:
        inner_spec = backend.spec
        backend = factory(backend, {k: v for k, v in parsed.params.items() if k in owned})
        backend.spec = (
            str(parsed.public()) if not backend.spec or backend.spec == inner_spec else backend.spec
        )
    return backend
