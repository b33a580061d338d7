"""``listenlab serve``: the Playground, the player's socket, the arena and the listening tests
on one port (:func:`app.server.create_app`)."""

from __future__ import annotations

import argparse
import asyncio
import os

from app.cli.options import add_host_args, hosts_from_args
from app.state import DEFAULT_CONCURRENCY
from backends.errors import ListenlabError


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="start the Playground (Gradio UI + streaming player)",
        description="Serve the Playground, the player's WebSocket and the listening tests on "
        "one port. The address is printed once the port is bound.",
    )
    p.add_argument(
        "--backend",
        action="append",
        dest="backends",
        metavar="SPEC",
        help="backend spec, or LABEL=SPEC; repeat for several "
        "(default: $LISTENLAB_BACKENDS, space-separated, else piper)",
    )
    p.add_argument(
        "--host",
        default=None,
        help="address to listen on (default $GRADIO_SERVER_NAME or 127.0.0.1)",
    )
    p.add_argument(
        "--port", type=int, default=None, help="port (default $GRADIO_SERVER_PORT or 7860)"
    )
    p.add_argument(
        "--db",
        default=None,
        help="SQLite store (default $LISTENLAB_DB, $LISTENLAB_DATA/listenlab.db or "
        "data/listenlab.db)",
    )
    p.add_argument(
        "--journal-mode",
        choices=["wal", "delete"],
        default=None,
        help="SQLite journal (default: wal; delete for a DB under /data, network storage)",
    )
    p.add_argument("--voices", default=None, help="voice library folder (default: next to --db)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"streams per backend at once; more wait their turn (default {DEFAULT_CONCURRENCY})",
    )
    add_host_args(p)
    p.set_defaults(func=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    import socket

    import uvicorn

    from app.config import backends_from_env, serve_settings, storage
    from app.server import WS_MAX_FRAME, create_app

    # a write for a third-party library (Gradio reads it when imported), allowed by
    # tests/test_architecture.py; every read of the environment is app.config's
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    env = serve_settings()
    host = args.host or env.host
    port = args.port or env.port
    hosts, origins = hosts_from_args(args, host, env)
    # Bind first: a busy port fails at once, before any model loads and before any banner.
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.set_inheritable(True)
    except OSError as e:
        raise ListenlabError(
            f"cannot listen on {host}:{port}: {e.strerror or e} "
            "(is another server using it? choose another with --port)"
        ) from None
    try:
        where = storage(db=args.db)
        app = create_app(
            args.backends or backends_from_env() or ["piper"],
            where.path,
            storage=where,
            voices_dir=args.voices,
            concurrency=args.concurrency,
            journal_mode=args.journal_mode,
            allowed_hosts=hosts,
            allowed_origins=origins,
        )
        store = app.state.listenlab.store
        # proxy_headers=False: uvicorn would believe X-Forwarded-For from 127.0.0.1 by itself;
        # app.web.proxies.Proxies ($LISTENLAB_TRUSTED_PROXIES, a Space's private proxy) decides that
        config = uvicorn.Config(
            app, log_level="warning", ws_max_size=WS_MAX_FRAME, proxy_headers=False
        )
        server = uvicorn.Server(config)

        async def serve() -> None:
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.05)
            if server.started:
                shown = f"[{host}]" if ":" in host else host
                print(f"listenlab Playground on http://{shown}:{port}/", flush=True)
                kept = "persistent" if where.persistent else f"NOT PERSISTENT: {where.note}"
                print(
                    f"listenlab: store {store.location} ({store.journal_mode}), {kept}",
                    flush=True,
                )
            await task

        asyncio.run(serve())
    finally:
        sock.close()
    return 0 if server.started else 1
