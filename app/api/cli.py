"""``listenlab api``: the command line."""

from __future__ import annotations

import argparse

# --------------------------------------------------------------------------- CLI


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "api", help="serve vLLM-Omni's speech API (HTTP, SSE, WebSocket) over any listenlab backend"
    )
    p.add_argument("--backend", default="piper", help="backend spec (default: piper)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--served-model-name", help="model id clients must send (default: the backend's name)"
    )
    p.add_argument("--log-level", default="warning")
    p.add_argument(
        "--concurrency",
        type=int,
        default=2,
        help="generations at once on the backend; the rest queue in arrival order (default 2)",
    )
    p.add_argument("--max-queue", type=int, default=256, help="queued requests beyond this get 503")
    from app.cli.options import add_host_args

    add_host_args(p)
    p.set_defaults(func=_run_api)


def _run_api(args: argparse.Namespace) -> int:
    import uvicorn

    from app.api.server import create_api_app
    from backends.registry import load_backend

    backend = load_backend(args.backend)
    backend.warm_up()
    from app.api.limits import ApiLimits
    from app.cli.options import hosts_from_args

    limits = ApiLimits(concurrency=args.concurrency, max_queue=args.max_queue)
    hosts, origins = hosts_from_args(args, args.host)

    def announce(state) -> None:
        # from the app's start-up, once a remote backend has said its model's name
        print(
            f"listenlab api: {backend.describe()} as model {state.served_model!r} on "
            f"http://{args.host}:{args.port}",
            flush=True,
        )

    app = create_api_app(
        backend,
        served_model=args.served_model_name,
        own_backend=True,
        limits=limits,
        allowed_hosts=hosts,
        allowed_origins=origins,
        announce=announce,
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        ws="websockets-sansio",
        ws_max_size=limits.ws_frame_bytes,
        proxy_headers=False,  # uvicorn would believe X-Forwarded-* from 127.0.0.1 by itself
    )
    return 0
