"""The designer's box for a study's audio: a ``.zip`` streamed to the server in chunks.

Why not a ``gr.File``: Gradio posts the whole file in one request (bounded at 10 MiB here by
the guard) and shows a failure as a toast that vanishes. This box (its script is
``static/upload.js``) sends the file in 16 MiB chunks to :mod:`app.listening.upload`, resumes
after a dropped connection, shows a progress bar, keeps every error on screen naming the file,
and on success puts the imported set's path in the "Your own audio" field that Generate reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from app.listening.upload import MAX_CHUNK_BYTES, max_upload_bytes

SCRIPT = Path(__file__).parent / "static" / "upload.js"

BOX = (
    "<div class='ll-up'>"
    "<label>… or upload that folder as a .zip (up to {max_gb:g} GiB; sent in "
    "{chunk_mib} MiB pieces, resumed if the connection drops; every file checked on the "
    "server): <input type='file' accept='.zip' class='ll-up-file'></label>"
    "<div><progress class='ll-up-bar' max='100' value='0' style='width:100%'></progress></div>"
    "<div class='ll-up-status' role='status'></div>"
    "<ul class='ll-up-errors' role='alert' style='color:#b00020'></ul>"
    "</div>"
)


def stimuli_uploader() -> Any:
    """The upload box (inside a Blocks context); ``elem_id="lt-stimuli-zip"``."""
    return gr.HTML(
        BOX.format(max_gb=round(max_upload_bytes() / 2**30, 2), chunk_mib=MAX_CHUNK_BYTES // 2**20),
        js_on_load=SCRIPT.read_text(encoding="utf-8"),
        elem_id="lt-stimuli-zip",
    )


__all__ = ["stimuli_uploader"]
