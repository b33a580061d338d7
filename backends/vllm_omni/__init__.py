"""vLLM-Omni: the embedded engine (``AsyncOmni``), the HTTP/WebSocket client, the per-model
adapters and model table, and the speech API's wire formats."""
