"""A real answer checked against what ``/openapi.json`` declares for it: the declared schema of
the operation's status, validated with ``jsonschema_rs`` (schemathesis's validator), its
``$ref``s resolved in the document's components. Room tests call it on answers their real
flows produce (a vote, a battle, a join), which a fuzz run rarely reaches."""

from __future__ import annotations

from typing import Any

import jsonschema_rs


def declared(spec: dict, method: str, path: str, status: int = 200) -> dict[str, Any]:
    """The JSON schema ``spec`` declares for ``method path``'s ``status`` answer."""
    op = spec["paths"][path][method.lower()]
    resp = op["responses"][str(status)]
    content = resp.get("content") or {}
    assert "application/json" in content, (method, path, status, resp)
    schema = content["application/json"].get("schema") or {}
    assert schema, f"{method} {path} {status} declares no schema"
    return schema


def assert_declared(spec: dict, method: str, path: str, body: Any, status: int = 200) -> None:
    """``body`` (a parsed JSON answer) is valid against the declared schema, and the schema
    is a real one (an object with properties, a ``$ref``, or an array of them)."""
    schema = declared(spec, method, path, status)
    assert schema != {"type": "object", "additionalProperties": True}, (method, path)
    root = {**schema, "components": spec.get("components", {})}
    errors = [e.message for e in jsonschema_rs.validator_for(root).iter_errors(body)]
    assert not errors, (method, path, errors[:5])
