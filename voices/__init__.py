"""Voice library and reference-clip handling (validation, conversion, storage)."""
