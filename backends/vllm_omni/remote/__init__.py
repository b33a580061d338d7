"""The remote engine: a vLLM-Omni (or ``listenlab api``) server, one module per transport.

Why a package: the client was one 800-line class with raw audio, SSE and WebSocket inline.
:mod:`.backend` is the engine (``vllm-omni+http://…``: options, capabilities, voices, the
served model's rules, which transport a request takes); :mod:`.server` is the connection to one
server (credentials, the HTTP client, the model card, the stream format when a stream does not
state it); :mod:`.http` sends a speech request over HTTP and reads the body by its
``Content-Type`` with :mod:`.raw` (raw PCM or streaming WAV, and whole files) or :mod:`.sse`
(Server-Sent Events); :mod:`.ws` is the WebSocket session. :mod:`.framing` turns byte pieces
into whole-frame chunks and bounds each phase's wait. Every byte format is read with
:mod:`backends.vllm_omni.wire`, the module ``listenlab api`` writes it with.
"""
