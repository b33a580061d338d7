"""Configuration from the environment: every ``LISTENLAB_*`` variable, in one table.

Why a module: a container (a Hugging Face Space) is configured with environment variables,
not flags, and docs/deploy.md's Configuration table must list exactly what the code reads. The
table below is that list; ``tests/test_cli.py`` checks that no other ``LISTENLAB_*`` name is
read anywhere in the package.
"""

from __future__ import annotations

import os
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

    def public(self) -> dict[str, object]:
        return {"persistent": self.persistent, "note": self.note}


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


__all__ = [
    "DEFAULT_DB",
    "ENV",
    "EnvVar",
    "Storage",
    "backends_from_env",
    "data_dir",
    "local_data_dir",
    "resolve_db",
    "shown_db",
    "storage",
]
