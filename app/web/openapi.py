"""The ``/openapi.json`` of both apps, generated from the models that validate each request.

Why a module of its own: a JSON route reads its body itself (the guard bounds its size, the
bounded parser of :mod:`app.web.inputs` its nesting, before any model sees it), so FastAPI,
which describes only the bodies it parses, would describe none of them. Instead a route takes
its body through a :class:`JsonBody` dependency naming the model that validates it, and its
router's :class:`DeclaredRoute` writes that model's own JSON schema into the operation: one
definition, the validator's, never a second copy. Error answers are declared from the error
classes a route raises (:func:`errors`: each class carries its status), and the guard's
refusals, which any route may answer, by :func:`install`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_typed_return_annotation
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError, create_model
from pydantic.json_schema import SkipJsonSchema

from app.web.errors import ErrorBody
from app.web.inputs import json_object
from backends.errors import InvalidRequest

REF = "#/components/schemas/{model}"
"""Where every model's schema is put (and referred to)."""


def schema_ref(model: Any, mode: str = "validation") -> dict[str, Any]:
    """A ``$ref`` to ``model``'s schema (``mode``: what a request is validated by, or what
    an answer is written as), with the definitions it needs under ``$defs`` (:func:`install`
    moves them to the document's components)."""
    name = model.__name__
    schema = TypeAdapter(model).json_schema(ref_template=REF, mode=mode)  # type: ignore[arg-type]
    defs = schema.pop("$defs", {})
    return {"$ref": REF.format(model=name), "$defs": {**defs, name: schema}}


def request_body(model: Any, *, required: bool = True, media: str = "application/json") -> dict:
    """An operation's ``requestBody`` whose schema is ``model``'s."""
    return {"required": required, "content": {media: {"schema": schema_ref(model)}}}


def validation_message(e: ValidationError) -> str:
    """Pydantic's errors in one line a person reads: ``name: Input should be a valid string``."""
    parts = []
    for err in e.errors(include_url=False)[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
    return "; ".join(parts)


class JsonBody:
    """A route's JSON body, read through the bounded parser and validated by ``model`` (a
    pydantic model or a dataclass); a refusal is :class:`InvalidRequest` (400) with the
    reason. Use ``body: Model = Depends(JsonBody(Model))``; :class:`DeclaredRoute` declares it.

    ``required=False``: an empty body is ``{}`` (the model's defaults), as the pages send it.
    ``parse``: the model's own reader (e.g. ``TestSpec.from_dict``, which also takes the
    shorthands a person types) validates instead of pydantic; the schema is still the model's.
    A subclass may read the bytes otherwise (:meth:`raw`: a room's own byte limit).
    """

    media = "application/json"

    def __init__(
        self, model: Any, *, required: bool = True, parse: Callable[[Any], Any] | None = None
    ):
        self.model = model
        self.required = required
        self.parse = parse
        self.adapter = TypeAdapter(model)

    def openapi(self) -> dict[str, Any]:
        return request_body(self.model, required=self.required, media=self.media)

    def validate(self, data: Any) -> Any:
        if self.parse is not None:
            return self.parse(data)
        try:
            return self.adapter.validate_python(data)
        except ValidationError as e:
            raise InvalidRequest(f"the body is not valid: {validation_message(e)}") from None

    async def raw(self, request: Request) -> bytes:
        """The body's bytes (the guard has bounded their number already)."""
        return await request.body()

    async def __call__(self, request: Request) -> Any:
        return self.validate(json_object(await self.raw(request)))


def as_sent(data: Any) -> Any:
    """``JsonBody(Model, parse=as_sent)``: the body goes on as sent, to the service that
    checks it with its own messages; ``Model`` declares what it accepts."""
    return data


def errors(*classes: type, model: Any = ErrorBody) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses=`` for the error classes a route raises: each class's
    ``http_status`` and the first line of its docstring; ``model`` is the body's shape, JSON
    whatever the route's own answer is (the one error handler writes it)."""
    out: dict[int | str, dict[str, Any]] = {}
    content = {"application/json": {"schema": schema_ref(model, "serialization")}}
    for cls in classes:
        status = cls.http_status
        doc = inspect.getdoc(cls) or cls.__name__
        line = doc.strip().splitlines()[0]
        if status in out:
            out[status]["description"] += f" / {line}"
        else:
            out[status] = {"description": line, "content": content}
    return out


def ok(model: Any, key: str | None = None) -> dict[int | str, Any]:
    """FastAPI ``responses=`` for a 200 written from ``model`` (the route returns the model's
    fields, e.g. ``asdict``); ``key``: a list of them under that key (``{"uploads": [...]}``)."""
    if key is not None:
        model = create_model(f"{model.__name__}List", **{key: (list[model], ...)})
    return {200: {"model": model, "description": "Successful Response"}}


Absent = SkipJsonSchema[None]
"""``note: str | Absent = None`` in an answer's dataclass: a key the answer leaves out when it
is None (:func:`answer`), so ``/openapi.json`` declares it not required and never null."""


@functools.cache
def absent_fields(cls: type) -> frozenset[str]:
    """The fields of dataclass ``cls`` typed ``... | Absent``."""

    def absent(t: Any) -> bool:
        return typing.get_origin(t) is Annotated and any(
            isinstance(m, SkipJsonSchema) for m in getattr(t, "__metadata__", ())
        )

    hints = typing.get_type_hints(cls, include_extras=True)
    return frozenset(n for n, t in hints.items() if any(absent(a) for a in typing.get_args(t)))


def answer(value: Any) -> Any:
    """A JSON answer written from a dataclass (at any depth): ``asdict``, less the fields
    typed ``| Absent`` that are None. Declare it with :func:`ok` (one definition: the class)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        skip = absent_fields(type(value))
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is None and f.name in skip:
                continue
            out[f.name] = answer(v)
        return out
    if isinstance(value, list | tuple):
        return [answer(v) for v in value]
    if isinstance(value, dict):
        return {k: answer(v) for k, v in value.items()}
    return value


def media(*types: str, description: str = "Successful Response") -> dict[int | str, Any]:
    """FastAPI ``responses=`` for a 200 that is not JSON (a WAV, a zip, a CSV, a script)."""
    return {200: {"description": description, "content": {t: {} for t in types}}}


def json_bodies(dependant: Dependant) -> Iterator[JsonBody]:
    """The :class:`JsonBody` dependencies of a route, at any depth."""
    for dep in dependant.dependencies:
        if isinstance(dep.call, JsonBody):
            yield dep.call
        yield from json_bodies(dep)


def same_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two schemas of one model (FastAPI writes defaults a little differently), not two
    models that share a name."""
    keys = ("title", "description", "required", "type", "enum")
    return all(a.get(k) == b.get(k) for k in keys) and set(a.get("properties", {})) == set(
        b.get("properties", {})
    )


def hoist_defs(node: Any, into: dict[str, Any]) -> None:
    """Move every ``$defs`` under ``node`` into ``into`` (the components' schemas)."""
    if isinstance(node, dict):
        for name, schema in node.pop("$defs", {}).items():
            if name in into and not same_model(into[name], schema):
                raise ValueError(f"two different schemas are named {name!r} in the API")
            into.setdefault(name, schema)
        for v in node.values():
            hoist_defs(v, into)
    elif isinstance(node, list):
        for v in node:
            hoist_defs(v, into)


def add_refusals(spec: dict[str, Any], guard: Mapping[int, str], model: Any) -> None:
    """Declare the guard's refusals (status -> description, ``model``'s shape) on every
    operation of ``spec``."""
    ref = schema_ref(model, "serialization")  # as FastAPI writes a response's model
    hoist_defs(ref, spec.setdefault("components", {}).setdefault("schemas", {}))
    content = {"application/json": {"schema": ref}}
    refusals = {str(s): {"description": d, "content": content} for s, d in guard.items()}
    for ops in spec.get("paths", {}).values():
        for method, op in ops.items():
            if method in METHODS:
                for status, resp in refusals.items():
                    op.setdefault("responses", {}).setdefault(status, resp)


METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options"})


def bare_dict_answer(endpoint: Callable[..., Any], kwargs: Mapping[str, Any]) -> bool:
    """A route that declares its 200's model (:func:`ok`) and is annotated ``-> dict[...]``:
    FastAPI would declare the annotation too (a bare object beside the model's ``$ref``)."""
    declared = (kwargs.get("responses") or {}).get(200) or {}
    if "model" not in declared or not isinstance(kwargs.get("response_model"), DefaultPlaceholder):
        return False
    hint = get_typed_return_annotation(endpoint)
    return hint is dict or typing.get_origin(hint) is dict


class DeclaredRoute(APIRoute):
    """A route whose :class:`JsonBody` (a dependency, at any depth) is declared as its
    ``requestBody``: ``APIRouter(route_class=DeclaredRoute)``. A 200 declared by :func:`ok`
    is the route's only answer schema (its ``-> dict`` annotation adds none)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if bare_dict_answer(endpoint, kwargs):
            kwargs["response_model"] = None
        super().__init__(path, endpoint, **kwargs)
        body = next(json_bodies(self.dependant), None)
        if body is not None:
            self.openapi_extra = {**(self.openapi_extra or {}), "requestBody": body.openapi()}


def install(app: FastAPI, *, guard: Mapping[int, str] | None = None, model: Any = ErrorBody):
    """Make ``app.openapi()`` declare the guard's refusals (``guard``: status ->
    description, answered in ``model``'s shape) on every operation, and move the definitions
    of the models :class:`DeclaredRoute` declared to the document's components."""
    generate = app.openapi
    done: list[int] = []

    def openapi() -> dict[str, Any]:
        spec = generate()  # FastAPI's (cached until a route is added)
        if id(spec) not in done:
            if guard:
                add_refusals(spec, guard, model)
            hoist_defs(spec, spec.setdefault("components", {}).setdefault("schemas", {}))
            done[:] = [id(spec)]
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = [
    "Absent",
    "DeclaredRoute",
    "answer",
    "as_sent",
    "JsonBody",
    "errors",
    "install",
    "media",
    "ok",
    "request_body",
    "schema_ref",
    "validation_message",
]
