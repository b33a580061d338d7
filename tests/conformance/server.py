"""vLLM-Omni's own speech server on 127.0.0.1, with the scripted engine in place of the GPU.

Run with the conformance environment's Python (never the main ``.venv``)::

    .venv-conformance/bin/python tests/conformance/server.py --serve qwen3_tts=8091 \
        [--serve qwen3_tts:replay=8092 ...] [--pace 4] [--workdir DIR]

The app is built the way ``vllm_omni.entrypoints.openai.api_server.omni_run_server_worker``
builds it: vLLM's ``build_app`` (its middleware and its request-validation handler), the
upstream routes vLLM-Omni removes removed, vLLM-Omni's ``router`` (``/v1/audio/speech``,
``/v1/audio/speech/stream``, ``/v1/audio/voices``, ``/v1/models``, ``/health``, …) included,
its exception handlers registered, and the speech part of ``omni_init_app_state``: the same
``OpenAIServingModels``, ``OmniOpenAIServingSpeech`` (+ ``warmup``) and
``OmniStreamingSpeechHandler`` constructor calls. Chat, responses, realtime and video handlers
are not built (they need a real vLLM engine and are not speech). Only the engine is scripted
(``tests/conformance/engine.py``). ``GET /_conformance/engine`` reports what the engine saw
(submitted texts, aborts) so tests can check that a cancel reached it, and
``GET /_conformance/last`` the exact samples the last request must have produced,
``/_conformance/schema`` the request schemas and ``/_conformance/routes`` the mounted routes.

Several servers (one per ``--serve``) share the process, so vLLM's imports are paid once.
Prints ``READY <port> ...`` on stdout once all of them accept connections.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # backends/profile.py (numpy only) and tests/conformance/engine.py

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def build_app(model: str, workdir: Path, pace: float, fault: str | None):
    """The FastAPI app of vLLM-Omni's API server over the scripted engine, and the engine."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.entrypoints.openai.models.protocol import BaseModelPath
    from vllm.entrypoints.openai.models.serving import OpenAIServingModels
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm_omni.entrypoints.cli.serve import _ensure_vllm_platform
    from vllm_omni.entrypoints.openai import api_server as omni
    from vllm_omni.entrypoints.openai.serving_speech import OmniOpenAIServingSpeech
    from vllm_omni.entrypoints.openai.serving_speech_stream import OmniStreamingSpeechHandler
    from vllm_omni.entrypoints.serve.utils.errors import _register_omni_exception_handlers

    from tests.conformance.engine import SEEDS, Script, ScriptedEngine, make_model_dir

    _ensure_vllm_platform()  # as `vllm serve --omni` does before parsing (CPU machine)
    seed = SEEDS[model]
    model_dir = make_model_dir(seed, workdir)
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(
        ["--model", str(model_dir), "--served-model-name", seed.served]
    )
    engine = ScriptedEngine(seed, model_dir, Script(pace=pace, fault=fault), seed.served)

    app = omni.build_openai_app(args, ())
    app.state.api_server_count = 1
    omni.remove_route_from_app(app, "/v1/chat/completions", {"POST"})
    omni.remove_route_from_app(app, "/v1/chat/completions/batch", {"POST"})
    omni.remove_route_from_app(app, "/v1/models", {"GET"})
    omni.remove_route_from_app(app, "/health", {"GET"})
    app.include_router(omni.router)
    _register_omni_exception_handlers(app)

    state = app.state
    state.engine_client = engine
    state.log_stats = False
    state.args = args
    state.sleeping_stages = set()
    state.stage_configs = engine.stage_configs
    state.vllm_config = None
    state.openai_serving_models = OpenAIServingModels(
        engine_client=engine,
        base_model_paths=[BaseModelPath(name=seed.served, model_path=str(model_dir))],
    )
    state.openai_serving_speech = OmniOpenAIServingSpeech(
        engine,
        state.openai_serving_models,
        request_logger=None,
        model_name=seed.served,
        forced_aligner_enabled=False,
    )
    state.openai_streaming_speech = OmniStreamingSpeechHandler(
        speech_service=state.openai_serving_speech
    )
    state.enable_server_load_tracking = False
    state.server_load_metrics = 0

    @app.get("/_conformance/engine")
    async def engine_stats():
        return engine.stats()

    @app.get("/_conformance/last")
    async def last_reference():
        return await asyncio.to_thread(engine.last_reference)

    @app.get("/_conformance/schema")
    async def schemas():
        """The request schemas the serving code parses (the matrix is generated from them)."""
        from vllm_omni.entrypoints.openai.protocol.audio import (
            OpenAICreateSpeechRequest,
            StreamingSpeechSessionConfig,
        )

        return {
            "speech": OpenAICreateSpeechRequest.model_json_schema(),
            "session": StreamingSpeechSessionConfig.model_json_schema(),
        }

    @app.get("/_conformance/routes")
    async def routes():
        """Every route the app mounts: (path, methods)."""
        return [
            [r.path, sorted(getattr(r, "methods", None) or ["WEBSOCKET"])]
            for r in app.routes
            if not r.path.startswith("/_conformance")
        ]

    return app, engine, state.openai_serving_speech


@dataclass(frozen=True)
class Target:
    """One server to run: a seed model, an optional injected fault, a pace and a port."""

    model: str
    fault: str | None
    port: int

    @classmethod
    def parse(cls, raw: str) -> Target:
        """``MODEL[:FAULT]=PORT``, e.g. ``qwen3_tts=8091`` or ``qwen3_tts:replay=8092``."""
        name, _, port = raw.partition("=")
        model, _, fault = name.partition(":")
        return cls(model, fault or None, int(port))


async def main_async(ns: argparse.Namespace) -> None:
    """Every target in one process (the vLLM imports take most of a minute; pay them once)."""
    import uvicorn

    root = Path(ns.workdir or tempfile.mkdtemp(prefix="ll-conformance-"))
    servers, speeches = [], []
    for t in ns.serve:
        workdir = root / f"{t.model}-{t.fault or 'ok'}-{t.port}"
        os.environ["SPEAKER_SAMPLES_DIR"] = str(workdir / "speakers")
        app, _engine, speech = build_app(t.model, workdir, ns.pace, t.fault)
        await speech.warmup()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=t.port, log_level="warning", timeout_graceful_shutdown=2
        )
        servers.append(uvicorn.Server(config))
        speeches.append(speech)

    async def announce() -> None:
        while not all(s.started for s in servers):
            await asyncio.sleep(0.05)
        print("READY " + " ".join(str(t.port) for t in ns.serve), flush=True)

    task = asyncio.create_task(announce())
    try:
        await asyncio.gather(*(s.serve() for s in servers))
    finally:
        task.cancel()
        for speech in speeches:
            speech.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--serve",
        type=Target.parse,
        action="append",
        required=True,
        help="MODEL[:FAULT]=PORT (repeatable); models: the seeds of tests/conformance/engine.py "
        "(qwen3_tts, fish_speech, cosyvoice3, moss_tts_nano, voxcpm2, audex, "
        "ming_flash_omni_tts, step_audio2); faults: replay, doubled",
    )
    p.add_argument("--pace", type=float, default=0.0, help="x real time; 0 = unpaced")
    p.add_argument("--workdir", default=None)
    ns = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main_async(ns))


if __name__ == "__main__":
    main()
