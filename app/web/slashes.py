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


def _flat(routes: Iterable[BaseRoute]) -> Iterable[BaseRoute]:
    """``routes`` with the routes of each router added by ``include_router`` in its place
    (FastAPI keeps an included router whole, its routes under the include's prefix)."""
    for r in routes:
        inner = getattr(r, "original_router", None)
        if inner is None:
            yield r
            continue
        prefix = getattr(getattr(r, "include_context", None), "prefix", "") or ""
        for x in _flat(inner.routes):
            if prefix and isinstance(x, Route):
                x = Route(prefix + x.path, x.endpoint, methods=x.methods)
            yield x


def slash_twins(routes: Iterable[BaseRoute]) -> list[Route]:
    """The redirect routes for ``routes``: ``/mount`` -> ``/mount/`` for each mounted app, and
    ``/route/`` <-> ``/route`` for each HTTP route (with its methods), skipping any path that
    a route already has."""
    routes = list(_flat(routes))
    taken = {r.path for r in routes if isinstance(r, Route)}
    methods: dict[tuple[str, bool], set[str]] = {}  # (twin path, adds the slash) -> methods
    for r in routes:
        if isinstance(r, Mount):
            twin, add, allowed = r.path, True, ALL_METHODS
        elif isinstance(r, Route) and r.path != "/":
            slash = r.path.endswith("/")
            twin = r.path.rstrip("/") if slash else r.path + "/"
            add, allowed = slash, r.methods or ALL_METHODS
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


__all__ = ["add_slash_redirects", "slash_twins"]
