"""The listening routes' success answers as typed models: what a route returns is what its
model lets through, and ``/openapi.json`` declares that model (``app.web.openapi.ok``).

Why a module of its own: the rater flow's answers are built in several modules
(:mod:`.enrolment`, :mod:`.screening`, :mod:`.service`, …) and the admin routes' in others;
each declares its answer's model beside the code that builds it, from the base here. Two
things about the wire are said once here, not in every model:

* a key that an answer carries only in some states (the status's ``break`` during a break,
  the completion code once done) is a field with a default that the builder leaves *unset*:
  :meth:`Answer.wire` leaves unset fields out, so the key is absent, as before, and the
  schema says it is not required;
* a float a dataclass holds as NaN (the planner's interval of a kind with no mean) leaves as
  ``null`` (pydantic's JSON mode); :func:`wire_model` makes such a dataclass's floats
  nullable in the declared schema.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.listening.jsonable import clean_json


class Answer(BaseModel):
    """A route's JSON answer: built from the values a step computed (no unknown key: a key
    the model does not declare is an error where it is made, not an undeclared answer)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_attribute_docstrings=True)

    @classmethod
    def of(cls, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` checked against the model and written as the wire's dictionary."""
        return cls.model_validate(values).wire()

    def wire(self) -> dict[str, Any]:
        """The answer's keys (by their wire names; unset optional fields left out). Without
        serializer warnings: a field written by its own serializer (the status' questionnaire
        page, :meth:`Page.to_dict`) writes a dictionary where its declared type is the class."""
        out = self.model_dump(by_alias=True, exclude_unset=True, warnings=False)
        return clean_json(out)  # a NaN is null on the wire, whatever the route's serializer


def nullable_floats(tp: Any) -> Any:
    """``float`` as ``float | None`` (a NaN is written as null), inside lists and unions too."""
    if tp is float:
        return float | None
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin is list and args:
        return list[nullable_floats(args[0])]  # type: ignore[misc]
    return tp


def dataclass_fields(cls: type) -> dict[str, Any]:
    """``create_model``'s fields of a dataclass: each field's type (bounds included) and
    default, so a model of it is derived from the dataclass, never written twice."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            out[f.name] = (hints[f.name], Field(default_factory=f.default_factory))
        else:
            out[f.name] = (hints[f.name], ... if f.default is dataclasses.MISSING else f.default)
    return out


def wire_model(
    cls: type,
    *,
    name: str | None = None,
    exclude: tuple[str, ...] = (),
    lead: dict[str, Any] | None = None,
    **override: Any,
) -> type[Answer]:
    """An :class:`Answer` of a dataclass's fields as its ``asdict`` writes them (``exclude``:
    fields the answer leaves out; ``override``: a field's type on the wire, or a new field
    after them, as ``(type, default)``; ``lead``: new fields before them); its floats may be
    null (see the module's docstring). The dataclass stays the one definition of its fields;
    only what the wire does to them is said here."""
    fields: dict[str, Any] = dict(lead or {})
    for k, (tp, default) in dataclass_fields(cls).items():
        if k in exclude:
            continue
        if isinstance(default, float) and math.isnan(default):
            default = None  # written as null (a NaN default would break the JSON)
        fields[k] = (nullable_floats(tp), default)
    fields.update(override)
    doc = (cls.__doc__ or "").strip()
    return create_model(name or cls.__name__, __doc__=doc, __base__=Answer, **fields)


__all__ = ["Answer", "dataclass_fields", "nullable_floats", "wire_model"]
