"""The Playground: the Gradio page at ``/`` and the small JSON API its player page uses
(backends and their capabilities, the voice library, a take's audio)."""
