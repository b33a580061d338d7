"""Every page answers with or without a trailing slash: ``/arena`` and ``/arena/`` alike.

Why: the Playground is a Gradio app mounted at ``/``, and that mount matches *every* path, so
Starlette's own ``redirect_slashes`` never runs. A mounted app (``/arena``, ``/admin/tests``)
then answers only ``/arena/`` and a plain route (``/listen/{test_id}``) only its own form; the
other form fell through to Gradio's 404. :func:`add_slash_redirects` puts a redirect twin of each
route and mount just before the catch-all mount, so the twin wins over Gradio and loses to
nothing real. A redirect keeps the method (307) and the query string (``?PROLIFIC_PID=…``) and
its ``Location`` is a path on the same host.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import routing as fastapi_routing
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Mount, Route

ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _to(request: Request, path: str) -> RedirectResponse:
    query = request.url.query
    return RedirectResponse(path + ("?" + query if query else ""), status_code=307)


async def _add_slash(request: Request) -> RedirectResponse:
    return _to(request, request.url.path + "/")


async def _strip_slash(request: Request) -> RedirectResponse:
    return _to(request, request.url.path.rstrip("/"))


def flat_routes(routes: Iterable[BaseRoute]) -> list[tuple[BaseRoute, str, set[str] | None]]:
    """``(route, full path, methods)`` of every route, the routes of included routers too:
    FastAPI 0.16x keeps an ``include_router`` as one entry whose routes it resolves lazily
    (``fastapi.routing.iter_route_contexts`` lists them); older FastAPI copied them in."""
    expand = getattr(fastapi_routing, "iter_route_contexts", None)
    if expand is None:
        return [(r, getattr(r, "path", ""), getattr(r, "methods", None)) for r in routes]
    return [(c.original_route, c.path or "", c.methods) for c in expand(list(routes))]


def slash_twins(routes: Iterable[BaseRoute]) -> list[Route]:
    """The redirect routes for ``routes``: ``/mount`` -> ``/mount/`` for each mounted app, and
    ``/route/`` <-> ``/route`` for each HTTP route (with its methods), skipping any path that
    a route already has."""
    routes = flat_routes(routes)
    taken = {path for r, path, _ in routes if isinstance(r, Route)}
    methods: dict[tuple[str, bool], set[str]] = {}  # (twin path, adds the slash) -> methods
    for r, path, route_methods in routes:
        if isinstance(r, Mount):
            twin, add, allowed = path, True, ALL_METHODS
        elif isinstance(r, Route) and path != "/":
            slash = path.endswith("/")
            twin = path.rstrip("/") if slash else path + "/"
            add, allowed = slash, route_methods or ALL_METHODS
        else:
            continue
        if twin and twin not in taken:
            methods.setdefault((twin, add), set()).update(allowed)
    return [
        Route(path, _add_slash if add else _strip_slash, methods=sorted(m), include_in_schema=False)
        for (path, add), m in methods.items()
    ]


def add_slash_redirects(app) -> None:
    """Insert :func:`slash_twins` before the catch-all mount at ``/`` (or last, without one).

    Call it once, after every route and mount is in place."""
    routes = app.router.routes
    root = next(
        (i for i, r in enumerate(routes) if isinstance(r, Mount) and r.path == ""), len(routes)
    )
    routes[root:root] = slash_twins(routes)


__all__ = ["add_slash_redirects", "flat_routes", "slash_twins"]
