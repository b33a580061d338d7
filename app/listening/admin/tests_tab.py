"""The admin page's Tests tab: the list; open, close, duplicate or delete a test (a deleted
test's export zip is kept); and a test's crowd settings, editable while it is open.
"""

from __future__ import annotations

import time
from typing import Any

import gradio as gr

from app.listening.admin.page import (
    AdminPage,
    bind,
    not_persistent_box,
    test_choices,
    test_listing,
)
from app.listening.designer import CROWD_FIELDS, change_crowd
from app.listening.persistence import check_may_open
from app.listening.routes import export_zip
from backends.errors import ListenlabError


def manage(page: AdminPage, tid: str | None, what: str, sure: bool = False) -> tuple:
    """Open, close, duplicate or delete a test (a deleted test's export zip is kept)."""
    if not tid:
        raise gr.Error("pick a test")
    tests, out_file = page.tests, None
    if what in {"open", "closed"}:
        if what == "open":
            try:
                check_may_open(page.state.storage, sure)
            except ListenlabError as e:
                raise gr.Error(str(e)) from None
        tests.set_status(tid, what)
        msg = f"{tid} is {what}."
    elif what == "dup":
        new = f"{tid[:8]}{int(time.time()) % 10000:04d}"
        tests.duplicate(tid, new)
        msg = (
            f"duplicated as {new}: a draft, picked below; change its crowd settings, then "
            "open it to take raters."
        )
        tid = new
    else:
        if not sure:
            raise gr.Error("tick the confirmation box to delete")
        page.exports.mkdir(parents=True, exist_ok=True)
        out_file = page.exports / f"{tid}-{int(time.time())}.zip"
        out_file.write_bytes(export_zip(page.svc, tid))
        tests.delete(tid)
        msg = f"deleted {tid}; its export is kept at {out_file}."
    picked = tid if what != "del" else None
    return (
        msg,
        test_listing(page),
        gr.update(choices=test_choices(page), value=picked),
        (str(out_file) if out_file else None),
    )


def open_test(page: AdminPage, tid: str | None, confirmed: bool = False) -> tuple:
    return manage(page, tid, "open", confirmed)


def close_test(page: AdminPage, tid: str | None) -> tuple:
    return manage(page, tid, "closed")


def duplicate_test(page: AdminPage, tid: str | None) -> tuple:
    return manage(page, tid, "dup")


def delete_test(page: AdminPage, tid: str | None, sure: bool) -> tuple:
    return manage(page, tid, "del", sure)


CROWD_LABELS = {
    "completion_code": "Completion code (empty: one per rater)",
    "excluded_code": "Code for raters the screening excludes (empty: the completion code)",
    "redirect_url": "Redirect URL when done (https://…, {code} is replaced)",
    "screenout_code": "Screen-out code (empty: one per rater)",
    "screenout_url": "Screen-out URL for a failed screen (https://…, {code} is replaced)",
}


def crowd_values(page: AdminPage, tid: str | None) -> list[Any]:
    """The picked test's crowd settings, for the Tests tab's editor."""
    if not tid:
        return [""] * len(CROWD_FIELDS) + [""]
    t = page.tests.require_test(tid)
    log = page.tests.changes(tid)
    note = f"{len(log)} change(s) recorded; the last at {log[-1].changed_at}." if log else ""
    return [t.config.get(k) or "" for k in CROWD_FIELDS] + [note]


def save_crowd(page: AdminPage, tid: str | None, *values: str) -> str:
    """Save the crowd settings of the picked test (open or not: raters get them at once)."""
    if not tid:
        raise gr.Error("pick a test")
    try:
        out = change_crowd(page.tests, tid, dict(zip(CROWD_FIELDS, values, strict=True)))
    except ListenlabError as e:
        raise gr.Error(str(e)) from None
    if not out["changed"]:
        return "Nothing changed."
    return f"Saved {', '.join(out['changed'])} for {tid} (each change recorded with its time)."


def tests_tab(page: AdminPage) -> tuple[Any, Any]:
    """The Tests tab: the list, and open, close, duplicate or delete one."""
    table = gr.Dataframe(value=bind(test_listing, page), interactive=False, label="Tests")
    pick = gr.Dropdown(choices=test_choices(page), label="Test")
    with gr.Row():
        b_open = gr.Button("Open")
        b_close = gr.Button("Close")
        b_dup = gr.Button("Duplicate")
    confirm_np = not_persistent_box(page, "lt-open-confirm-np")
    confirm = gr.Checkbox(label="Yes, delete this test (an export zip is kept)")
    b_del = gr.Button("Delete", variant="stop")
    manage_out = gr.Markdown()
    kept = gr.File(label="Export kept")
    outs = [manage_out, table, pick, kept]
    gr.Markdown("### Crowd settings (editable while the test is open)")
    crowd = [gr.Textbox(label=CROWD_LABELS[k], elem_id=f"lt-crowd-{k}") for k in CROWD_FIELDS]
    crowd_note = gr.Markdown(elem_id="lt-crowd-note")
    b_crowd = gr.Button("Save crowd settings", elem_id="lt-crowd-save")
    pick.change(bind(crowd_values, page), pick, [*crowd, crowd_note])
    b_crowd.click(bind(save_crowd, page), [pick, *crowd], crowd_note)
    b_open.click(bind(open_test, page), [pick, confirm_np], outs)
    b_close.click(bind(close_test, page), pick, outs)
    b_dup.click(bind(duplicate_test, page), pick, outs)
    b_del.click(bind(delete_test, page), [pick, confirm], outs)
    return table, pick


__all__ = [
    "close_test",
    "crowd_values",
    "delete_test",
    "duplicate_test",
    "manage",
    "open_test",
    "save_crowd",
    "tests_tab",
]
