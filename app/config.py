"""Configuration from the environment: every ``LISTENLAB_*`` variable, in one table.

Why a module: a container (a Hugging Face Space) is configured with environment variables,
not flags, and docs/deploy.md's Configuration table must list exactly what the code reads. The
table below is that list; ``tests/test_cli.py`` checks that no other ``LISTENLAB_*`` name is
read anywhere in the package.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from backends.errors import InvalidRequest


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: str
    effect: str


ENV: tuple[EnvVar, ...] = (
    EnvVar(
        "LISTENLAB_BACKENDS",
        "piper",
        "Backends `listenlab serve` offers when no `--backend` is given: space-separated "
        "`SPEC` or `LABEL=SPEC`, e.g. `piper qwen=vllm-omni+http://gpu:8000?model=Qwen/Qwen3-TTS`.",
    ),
    EnvVar(
        "LISTENLAB_DB",
        "unset",
        "The store: a SQLite file path, or a `postgresql://` URL (replicas share it; `?pool_size=N` "
        "caps each replica's connections, default 10). Wins over `LISTENLAB_DATA`. Voices go to "
        "`voices/` beside a SQLite file, or into the local data folder with PostgreSQL.",
    ),
    EnvVar(
        "LISTENLAB_DATA",
        "unset (then `data/` in the working directory)",
        "Data folder for `listenlab.db`, its audio and the voice library. A colon-separated list "
        "picks the first folder that exists and is writable (else creates the last): the image "
        "sets `/data:/home/user/data`, so a Space with persistent storage keeps its data. Under "
        "`/data` the DB uses journal_mode=DELETE (WAL is unsafe on network storage).",
    ),
    EnvVar(
        "LISTENLAB_ADMIN_PASSWORD",
        "unset (admin pages answer localhost only)",
        "Password for the admin pages (`POST /ll/admin/login` sets a signed cookie).",
    ),
    EnvVar(
        "LISTENLAB_SECRET_KEY",
        "random per process",
        "Key that signs the admin cookie; set it so logins survive a restart.",
    ),
    EnvVar(
        "LISTENLAB_UPLOAD_MAX_BYTES",
        "2147483648 (2 GiB)",
        "Largest study `.zip` the admin may upload to `/ll/admin/uploads` (from the designer, or the CLI with `--server URL`), and the most its files may unpack to; at least 10485760.",
    ),
    EnvVar(
        "LISTENLAB_VLLM_MODEL",
        "unset (GPU test skipped)",
        "Tests only: a local Qwen3-TTS model for the real embedded vLLM-Omni test (`pytest -m gpu`).",
    ),
    EnvVar(
        "LISTENLAB_CONFORMANCE_PYTHON",
        "unset (conformance tests skipped)",
        "Tests only: the python of the vLLM-Omni 0.30.0 environment that `pytest -m conformance` "
        "serves vLLM-Omni's own speech code from (`.ci/run` builds it as `.venv-conformance`).",
    ),
    EnvVar(
        "LISTENLAB_TEST_PG",
        "unset (each test worker starts a throwaway PostgreSQL cluster)",
        "Tests only: the URL of a PostgreSQL server's maintenance database that the store tests "
        "create their databases on (`.ci/run` starts one and sets it).",
    ),
    EnvVar(
        "LISTENLAB_MATRIX_MODELS",
        "unset (every seed model)",
        "Tests only: a comma-separated subset of seed models for the conformance request matrix (development; CI runs all).",
    ),
    EnvVar(
        "LISTENLAB_CONFORMANCE_REQUIRED",
        "unset",
        "Tests only: `1` makes a missing conformance environment an error instead of a skip (CI).",
    ),
    EnvVar(
        "LISTENLAB_R_REQUIRED",
        "unset",
        "Tests only: `1` makes a missing `Rscript` (with lme4) an error instead of a skip for the "
        "docs' R analysis (CI).",
    ),
    EnvVar(
        "LISTENLAB_CONFORMANCE_REUSE",
        "unset",
        "Tests only: a JSON file `{target: url}` of conformance servers already running, so a "
        "test edit does not pay vLLM's minute of imports.",
    ),
    EnvVar(
        "LISTENLAB_BASE_IMAGE",
        "python:3.11-slim",
        "Build argument of the Dockerfile (on a Space: a variable, which reaches the build): the base image. A CUDA base, e.g. `nvidia/cuda:12.8.1-runtime-ubuntu24.04`, builds the GPU image (the `[gpu]` extra is installed when the base has `/usr/local/cuda`).",
    ),
    EnvVar(
        "LISTENLAB_METRICS_REQUIRED",
        "unset",
        "Tests only: `1` makes a missing `[metrics]` extra an error instead of a skip for `tests/test_metrics.py` (CI).",
    ),
    EnvVar(
        "LISTENLAB_FUZZ_SEED",
        "20240611",
        "Tests only: the seed of the schema-driven fuzz run of both apps (`tests/test_openapi_fuzz.py`); another seed explores other requests.",
    ),
    EnvVar(
        "LISTENLAB_FUZZ_EXAMPLES",
        "8",
        "Tests only: examples per operation in that fuzz run's fuzzing phase (more: a longer, wider run).",
    ),
    EnvVar(
        "LISTENLAB_METRICS",
        "auto",
        "Build argument of the Dockerfile: `auto` installs the `[metrics]` extra (docs/metrics.md) on a CPU base when the CPU build of torch 2.13.0 can be had, `1` fails the build without it, `0` never installs it. A CUDA base never gets it.",
    ),
    EnvVar(
        "LISTENLAB_TORCH_INDEX",
        "https://download.pytorch.org/whl/cpu",
        "Build argument of the Dockerfile: the package index the CPU build of torch (`torch==2.13.0+cpu`) comes from for the `[metrics]` extra.",
    ),
    EnvVar(
        "LISTENLAB_TORCH_WHEELS",
        "unset",
        "Build argument of the Dockerfile: a folder with the CPU torch wheel, mounted into the build (buildah `-v`), searched before the index.",
    ),
    EnvVar(
        "LISTENLAB_IMAGE",
        "unset (image tests skipped)",
        "Tests only: the built Space image that `pytest -m image tests/test_image.py` runs with podman (`.ci/image` builds it and sets this).",
    ),
    EnvVar(
        "LISTENLAB_ALLOWED_HOSTS",
        "unset (bound host, localhost and `$SPACE_HOST`)",
        "Extra `Host` names `serve`/`api` accept (comma-separated); others get 403 (DNS rebinding). Same as `--allowed-hosts`.",
    ),
    EnvVar(
        "LISTENLAB_ALLOWED_ORIGINS",
        "unset (the page's own origin)",
        "Extra browser origins allowed on the WebSockets and state-changing routes (comma-separated). Same as `--allowed-origins`.",
    ),
    EnvVar(
        "LISTENLAB_VLLM_API_KEY",
        "unset",
        "API key for a remote vLLM-Omni server, sent as Bearer; keeps the key out of the spec (never published).",
    ),
    EnvVar(
        "LISTENLAB_ARENA_BATTLES_PER_MIN",
        "10",
        "Arena: battles one voter (a Hugging Face login, else a client address) may start per minute.",
    ),
    EnvVar(
        "LISTENLAB_ARENA_VOTES_PER_HOUR",
        "30",
        "Arena: votes counted per voter per hour (more are refused with 429).",
    ),
    EnvVar(
        "LISTENLAB_ARENA_VOTES_PER_DAY",
        "150",
        "Arena: votes counted per voter per day.",
    ),
    EnvVar(
        "LISTENLAB_TRUSTED_PROXIES",
        "unset (on a Space: the private ranges its proxy connects from)",
        "Comma-separated proxy addresses or networks whose `X-Forwarded-For`/`X-Forwarded-Proto` are believed (client address for limits, TLS for `Secure` cookies); from anyone else those headers are ignored.",
    ),
    EnvVar(
        "LISTENLAB_WS_STALL_S",
        "30",
        "Seconds a `/ll/ws` client may leave over 2 MB of replies unread before it is disconnected (it is slowed first: its messages are not read).",
    ),
    EnvVar(
        "LISTENLAB_ARENA_GLOBAL_PER_MIN",
        "120",
        "Arena: battles all visitors together may start per minute.",
    ),
    EnvVar(
        "LISTENLAB_ARENA_MIN_VOTES",
        "20",
        "Arena: the default listing threshold: votes a system needs before it is ranked (the admin can change it on /admin/arena).",
    ),
    EnvVar(
        "LISTENLAB_ARENA_CONFIG",
        "unset (every system with its backend's default voice and languages; the bundled English prompts)",
        "Arena: a TOML or JSON file of each system's voices and languages and the prompts per language (see docs/arena.md).",
    ),
    EnvVar(
        "LISTENLAB_VLLM_MODEL_QWEN3_TTS",
        "unset (that model's GPU test skipped)",
        "Tests only: local weights of the Qwen3 Tts seed model for its real embedded vLLM-Omni test (`pytest -m gpu`).",
    ),
    EnvVar(
        "LISTENLAB_VLLM_MODEL_FISH_SPEECH",
        "unset (that model's GPU test skipped)",
        "Tests only: local weights of the Fish Speech seed model for its real embedded vLLM-Omni test (`pytest -m gpu`).",
    ),
    EnvVar(
        "LISTENLAB_VLLM_MODEL_COSYVOICE3",
        "unset (that model's GPU test skipped)",
        "Tests only: local weights of the Cosyvoice3 seed model for its real embedded vLLM-Omni test (`pytest -m gpu`).",
    ),
    EnvVar(
        "LISTENLAB_VLLM_MODEL_MOSS_TTS_NANO",
        "unset (that model's GPU test skipped)",
        "Tests only: local weights of the Moss Tts Nano seed model for its real embedded vLLM-Omni test (`pytest -m gpu`).",
    ),
    EnvVar(
        "LISTENLAB_VLLM_MODEL_VOXCPM2",
        "unset (that model's GPU test skipped)",
        "Tests only: local weights of the Voxcpm2 seed model for its real embedded vLLM-Omni test (`pytest -m gpu`).",
    ),
    EnvVar(
        "LISTENLAB_FRAME_ANCESTORS",
        "unset (on a Space: `https://huggingface.co` and `https://$SPACE_HOST`; elsewhere none)",
        "Other sites' origins that may show `serve`'s pages in a frame (comma-separated, e.g. "
        "`https://huggingface.co,https://me-study.hf.space`; `none` for no other site); the "
        "page's own origin always may (`Content-Security-Policy: frame-ancestors`).",
    ),
    EnvVar(
        "GRADIO_SERVER_NAME",
        "127.0.0.1",
        "`listenlab serve`'s address when `--host` is not given (the image sets `0.0.0.0`).",
    ),
    EnvVar(
        "GRADIO_SERVER_PORT",
        "7860",
        "`listenlab serve`'s port when `--port` is not given.",
    ),
)


def backends_from_env(environ: dict[str, str] | None = None) -> list[str]:
    """``$LISTENLAB_BACKENDS`` split into ``SPEC``/``LABEL=SPEC`` items ([] when unset)."""
    raw = (environ if environ is not None else os.environ).get("LISTENLAB_BACKENDS", "")
    return raw.split()


def data_dir(raw: str) -> Path:
    """The first existing writable folder of a colon-separated list, else the last (created)."""
    cands = [Path(p).expanduser() for p in raw.split(":") if p.strip()]
    if not cands:
        raise InvalidRequest("LISTENLAB_DATA is set but empty")
    for c in cands:
        if c.is_dir() and os.access(c, os.W_OK | os.X_OK):
            return c
    cands[-1].mkdir(parents=True, exist_ok=True)
    return cands[-1]


DEFAULT_DB = "data/listenlab.db"
"""Where the store lives when neither ``LISTENLAB_DB`` nor ``LISTENLAB_DATA`` is set."""


def local_data_dir(environ: dict[str, str] | None = None) -> Path:
    """This process's own folder when the store is on PostgreSQL (the audio it has read back,
    exports, voices): ``$LISTENLAB_DATA``'s pick, else ``data``."""
    env = environ if environ is not None else os.environ
    return data_dir(env["LISTENLAB_DATA"]) if env.get("LISTENLAB_DATA") else Path("data")


def resolve_db(environ: dict[str, str] | None = None) -> str:
    """The store's path, the one rule every command uses (``serve``, ``test``, ``api``...):
    ``$LISTENLAB_DB``, else ``<data dir>/listenlab.db`` (:func:`data_dir` picks the first
    writable folder of ``$LISTENLAB_DATA``), else ``data/listenlab.db``."""
    env = environ if environ is not None else os.environ
    if env.get("LISTENLAB_DB"):
        return env["LISTENLAB_DB"]
    if env.get("LISTENLAB_DATA"):
        return str(data_dir(env["LISTENLAB_DATA"]) / "listenlab.db")
    return DEFAULT_DB


@dataclass(frozen=True)
class Storage:
    """Where the store is, and whether it outlives the container: what ``listenlab serve``
    logs at start, ``/ll/health`` reports and the admin pages warn about."""

    path: str
    persistent: bool
    note: str

    def public(self, admin: bool = False) -> dict[str, object]:
        """What ``/ll/health`` shows: the admin the whole note, anyone else whether the data
        persists without where it is (a path tells a visitor about the server's disk)."""
        if admin:
            return {"persistent": self.persistent, "note": self.note}
        note = PERSISTENT_NOTE if self.persistent else NOT_PERSISTENT_NOTE
        return {"persistent": self.persistent, "note": note}


PERSISTENT_NOTE = "the data is kept across restarts"
NOT_PERSISTENT_NOTE = (
    "the data is lost when the container restarts: no persistent storage is attached "
    "(the admin sees where it goes)"
)


def shown_db(path: str) -> str:
    """The store's name for logs and ``/ll/health``: a PostgreSQL URL holds a password, so it
    is never shown."""
    return "PostgreSQL" if path.startswith(("postgresql://", "postgres://")) else path


def storage(environ: dict[str, str] | None = None, db: str | None = None) -> Storage:
    """:func:`resolve_db`'s answer, with whether it is persistent.

    Not persistent: ``$LISTENLAB_DATA`` lists several folders and none but the last (the
    fallback, e.g. the container's own ``/home/user/data``) is writable: on a Space that means
    no persistent storage is attached (or ``/data`` is not writable by this user), and every
    restart or push loses the data. A path chosen with ``$LISTENLAB_DB`` or the default
    ``data/`` folder is taken as the user's own disk."""
    if db:
        return Storage(db, True, f"{shown_db(db)} (--db)")
    env = environ if environ is not None else os.environ
    path = resolve_db(env)
    if env.get("LISTENLAB_DB"):
        return Storage(path, True, f"{shown_db(path)} (LISTENLAB_DB)")
    raw = env.get("LISTENLAB_DATA", "")
    cands = [Path(p).expanduser() for p in raw.split(":") if p.strip()]
    if len(cands) < 2 or Path(path).parent != cands[-1]:
        return Storage(path, True, f"{path}")
    first = cands[0]
    why = (
        f"{first} exists but is not writable by this user (uid {os.getuid()})"
        if first.is_dir()
        else f"{first} does not exist (no persistent storage is attached)"
    )
    return Storage(
        path,
        False,
        f"{why}: the data goes to {path}, which is lost when the container restarts. On a "
        "Hugging Face Space, add persistent storage (Settings → Persistent storage mounts "
        "/data) before running a study.",
    )


def backend_spec_defaults(environ: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """Spec parameters the backends get from the environment, by engine: the remote vLLM-Omni
    engine's ``api_key`` from ``$LISTENLAB_VLLM_API_KEY`` (a spec's own ``api_key`` wins)."""
    env = environ if environ is not None else os.environ
    key = env.get("LISTENLAB_VLLM_API_KEY")
    return {"vllm-omni+http": {"api_key": key}} if key else {}


def apply_backend_settings(environ: dict[str, str] | None = None) -> None:
    """Hand :func:`backend_spec_defaults` to the backend registry, once at start (the backends
    layer never reads the environment; ``listenlab``'s entry point calls this)."""
    from backends.settings import set_spec_defaults

    set_spec_defaults(backend_spec_defaults(environ))


# --------------------------------------------------------------------------- the web's settings

ENV_ALLOWED_HOSTS = "LISTENLAB_ALLOWED_HOSTS"
ENV_ALLOWED_ORIGINS = "LISTENLAB_ALLOWED_ORIGINS"
ENV_FRAME_ANCESTORS = "LISTENLAB_FRAME_ANCESTORS"
ENV_TRUSTED_PROXIES = "LISTENLAB_TRUSTED_PROXIES"
ENV_ADMIN_PASSWORD = "LISTENLAB_ADMIN_PASSWORD"
ENV_SECRET_KEY = "LISTENLAB_SECRET_KEY"
ENV_WS_STALL_S = "LISTENLAB_WS_STALL_S"
ENV_UPLOAD_MAX_BYTES = "LISTENLAB_UPLOAD_MAX_BYTES"
HF_PARENT = "https://huggingface.co"
"""The page a Space is shown in (its frame's parent)."""
WS_STALL_S = 30.0
UPLOAD_MAX_BYTES = 2 * 1024**3
UPLOAD_MIN_BYTES = 10 * 1024**2
"""The smallest ``LISTENLAB_UPLOAD_MAX_BYTES`` (one stimulus file may be 10 MiB)."""
_ORIGIN_RE = re.compile(r"^https?://(\*\.)?[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$")


def split_list(value: str | None) -> list[str]:
    """A comma-separated variable's items, stripped, empty ones dropped."""
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def frame_ancestors(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The origins besides the page's own that may frame ``serve``'s pages.

    Why these: a Space is shown inside huggingface.co's page, and any other site that frames
    the admin pages could click for a logged-in admin (the login cookie is ``SameSite=None``
    so that it works in huggingface.co's frame)."""
    env = environ if environ is not None else os.environ
    raw = env.get(ENV_FRAME_ANCESTORS, "").strip()
    if not raw:
        space = env.get("SPACE_HOST", "").strip().lower()
        return (HF_PARENT, f"https://{space}") if space else ()
    if raw.lower() == "none":
        return ()
    items = [x.lower().rstrip("/") for x in split_list(raw)]
    bad = [x for x in items if not _ORIGIN_RE.match(x)]
    if bad:
        raise InvalidRequest(
            f"{ENV_FRAME_ANCESTORS}: {', '.join(bad)} is not an origin such as "
            "https://huggingface.co (a scheme, a host, maybe a port; `none` for no other site)"
        )
    return tuple(dict.fromkeys(items))


def upload_max_bytes(environ: Mapping[str, str] | None = None) -> int:
    """``$LISTENLAB_UPLOAD_MAX_BYTES``: the largest study ``.zip`` (default 2 GiB)."""
    raw = (environ if environ is not None else os.environ).get(ENV_UPLOAD_MAX_BYTES, "")
    if not raw.strip():
        return UPLOAD_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequest(
            f"{ENV_UPLOAD_MAX_BYTES} must be a number of bytes, not {raw!r}"
        ) from None
    if value < UPLOAD_MIN_BYTES:
        raise InvalidRequest(f"{ENV_UPLOAD_MAX_BYTES} must be at least {UPLOAD_MIN_BYTES} bytes")
    return value


def admin_password(environ: Mapping[str, str] | None = None) -> str | None:
    """``$LISTENLAB_ADMIN_PASSWORD`` (None when unset or empty)."""
    return (environ if environ is not None else os.environ).get(ENV_ADMIN_PASSWORD) or None


def _positive_float(raw: str | None, default: float) -> float:
    try:
        return max(0.1, float(raw)) if raw not in (None, "") else default
    except ValueError:
        return default


@dataclass(frozen=True)
class WebSettings:
    """Everything the web plumbing (``app/web``) and ``listenlab test --server`` take from the
    environment, read once (:meth:`from_env`) and handed to the app that uses it; the rooms
    never read the environment themselves."""

    space_host: str = ""
    """``$SPACE_HOST``: set by Hugging Face on a Space (its own host name)."""
    space_id: str = ""
    """``$SPACE_ID``: set by Hugging Face on a Space (its proxy connects from private ranges)."""
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    frame_ancestors: tuple[str, ...] = ()
    trusted_proxies: tuple[str, ...] = ()
    admin_password: str | None = None
    secret_key: str | None = None
    hf_client_id: str = ""
    """``$OAUTH_CLIENT_ID``: set on a Space whose README has ``hf_oauth: true``."""
    hf_client_secret: str = ""
    ws_stall_s: float = WS_STALL_S
    upload_max_bytes: int = UPLOAD_MAX_BYTES
    """``$LISTENLAB_UPLOAD_MAX_BYTES``: the largest study ``.zip`` (and what it unpacks to)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WebSettings:
        env = environ if environ is not None else os.environ
        return cls(
            space_host=env.get("SPACE_HOST", "").strip(),
            space_id=env.get("SPACE_ID", "").strip(),
            allowed_hosts=tuple(split_list(env.get(ENV_ALLOWED_HOSTS))),
            allowed_origins=tuple(split_list(env.get(ENV_ALLOWED_ORIGINS))),
            frame_ancestors=frame_ancestors(env),
            trusted_proxies=tuple(split_list(env.get(ENV_TRUSTED_PROXIES))),
            admin_password=admin_password(env),
            secret_key=env.get(ENV_SECRET_KEY) or None,
            hf_client_id=env.get("OAUTH_CLIENT_ID", ""),
            hf_client_secret=env.get("OAUTH_CLIENT_SECRET", ""),
            ws_stall_s=_positive_float(env.get(ENV_WS_STALL_S), WS_STALL_S),
            upload_max_bytes=upload_max_bytes(env),
        )


# --------------------------------------------------------------------------- the arena, serve


def env_default(name: str) -> str:
    """The default :data:`ENV` documents for ``name`` (one number for the code and the docs)."""
    return next(v.default for v in ENV if v.name == name)


def env_int(name: str, environ: Mapping[str, str] | None = None, *, floor: int = 0) -> int:
    """``$name`` as a whole number of at least ``floor``; unset or not a number: its default."""
    env = environ if environ is not None else os.environ
    default = int(env_default(name))
    try:
        return max(floor, int(env.get(name, default)))
    except ValueError:
        return max(floor, default)


@dataclass(frozen=True)
class ArenaSettings:
    """The arena's deployment knobs (``LISTENLAB_ARENA_*``), read once when the app is built
    (:func:`app.arena.install`); each rate is at least 1, the threshold at least 0."""

    battles_per_minute: int
    global_battles_per_minute: int
    votes_per_hour: int
    votes_per_day: int
    min_votes: int
    config_file: str | None = None
    """``LISTENLAB_ARENA_CONFIG``: the arena file (:mod:`app.arena.lineup`), or None."""


def arena_settings(environ: Mapping[str, str] | None = None) -> ArenaSettings:
    """:class:`ArenaSettings` from the environment (``environ``: another mapping, for tests)."""
    return ArenaSettings(
        battles_per_minute=env_int("LISTENLAB_ARENA_BATTLES_PER_MIN", environ, floor=1),
        global_battles_per_minute=env_int("LISTENLAB_ARENA_GLOBAL_PER_MIN", environ, floor=1),
        votes_per_hour=env_int("LISTENLAB_ARENA_VOTES_PER_HOUR", environ, floor=1),
        votes_per_day=env_int("LISTENLAB_ARENA_VOTES_PER_DAY", environ, floor=1),
        min_votes=env_int("LISTENLAB_ARENA_MIN_VOTES", environ),
        config_file=(environ if environ is not None else os.environ).get("LISTENLAB_ARENA_CONFIG")
        or None,
    )


@dataclass(frozen=True)
class ServeSettings:
    """What ``listenlab serve`` and ``listenlab api`` take from the environment besides their
    flags: the address (Gradio's own variables, which the image and Spaces set) and the web's
    settings (:class:`WebSettings`: whether this is a Space, the extra page origins), each
    variable read once, in one place."""

    host: str
    port: int
    web: WebSettings

    @property
    def space_host(self) -> str | None:
        """``$SPACE_HOST`` (set by the platform on a Hugging Face Space), or None."""
        return self.web.space_host or None

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        return self.web.allowed_origins


def serve_settings(environ: Mapping[str, str] | None = None) -> ServeSettings:
    """:class:`ServeSettings` from the environment; a port that is not a number is refused."""
    env = environ if environ is not None else os.environ
    raw_port = env.get("GRADIO_SERVER_PORT") or env_default("GRADIO_SERVER_PORT")
    try:
        port = int(raw_port)
    except ValueError:
        raise InvalidRequest(
            f"GRADIO_SERVER_PORT must be a port number, not {raw_port!r}"
        ) from None
    return ServeSettings(
        host=env.get("GRADIO_SERVER_NAME") or env_default("GRADIO_SERVER_NAME"),
        port=port,
        web=WebSettings.from_env(env),
    )


__all__ = [
    "DEFAULT_DB",
    "ENV",
    "ArenaSettings",
    "EnvVar",
    "ServeSettings",
    "Storage",
    "apply_backend_settings",
    "backend_spec_defaults",
    "WebSettings",
    "admin_password",
    "frame_ancestors",
    "split_list",
    "upload_max_bytes",
    "arena_settings",
    "env_default",
    "env_int",
    "serve_settings",
    "backends_from_env",
    "data_dir",
    "local_data_dir",
    "resolve_db",
    "shown_db",
    "storage",
]
