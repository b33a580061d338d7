"""Gradio UI, HTTP/WebSocket routes, the streaming player and the CLI."""
