"""STAND-IN for the one ``transformers`` call the embedded vLLM-Omni adapters make, tests only.

Real: ``AutoTokenizer.from_pretrained(model_dir, trust_remote_code=True)`` loads the tokenizer a
model ships (Fish Speech's Qwen3 BPE with ``<|im_start|>``/``<|voice|>`` control tokens,
VoxCPM2's tokenizer, CosyVoice3's ``CosyVoice-BlankEN``). Those files come from the Hugging
Face hub and cannot be fetched here, so the test model directories hold a tiny
``tokenizer_config.json`` instead and this module reads it: control tokens map to their ids, all
other text is byte-level (id = 1000 + UTF-8 byte), so ``decode(encode(t)) == t`` and the
stand-in engine can read the text back out of a token-id prompt (VoxCPM2 sends only ids).

The methods are the ones the adapters and the stand-in engine call, with the real signatures:
``encode(text, add_special_tokens=True)``, ``decode(ids, skip_special_tokens=False)``,
``convert_tokens_to_ids(token | list)``, ``get_vocab()``, ``unk_token_id``, ``bos_token_id``,
and ``tokenizer(text, padding=False)["input_ids"]``. A directory without the file raises
``OSError`` as the real loader does.

Put ``tests/vllm_omni_standin`` on ``sys.path`` only inside a test fixture.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

BYTE_BASE = 1000
UNK_ID = 0


class StandInTokenizer:
    def __init__(self, special: dict[str, int], bos_token: str | None = None):
        self.special = dict(special)
        self.by_id = {v: k for k, v in self.special.items()}
        self.unk_token_id = UNK_ID
        self.bos_token_id = self.special.get(bos_token) if bos_token else None
        names = sorted(self.special, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(map(re.escape, names)) + ")") if names else None

    def encode(self, text: str, add_special_tokens: bool = True, **_: Any) -> list[int]:
        ids: list[int] = []
        if add_special_tokens and self.bos_token_id is not None:
            ids.append(self.bos_token_id)
        parts = self._split.split(text) if self._split else [text]
        for part in parts:
            if part in self.special:
                ids.append(self.special[part])
            else:
                ids.extend(BYTE_BASE + b for b in part.encode("utf-8"))
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False, **_: Any) -> str:
        out: list[str] = []
        buf = bytearray()
        for i in ids:
            i = int(i)
            if BYTE_BASE <= i < BYTE_BASE + 256 and i not in self.by_id:
                buf.append(i - BYTE_BASE)
                continue
            if buf:
                out.append(buf.decode("utf-8"))
                buf.clear()
            if i == self.bos_token_id or skip_special_tokens:
                continue
            out.append(self.by_id.get(i, "<unk>"))
        if buf:
            out.append(buf.decode("utf-8"))
        return "".join(out)

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | list[int]:
        if isinstance(tokens, list):
            return [self.convert_tokens_to_ids(t) for t in tokens]  # type: ignore[misc]
        if tokens in self.special:
            return self.special[tokens]
        raw = tokens.encode("utf-8")
        return BYTE_BASE + raw[0] if len(raw) == 1 else self.unk_token_id

    def get_vocab(self) -> dict[str, int]:
        vocab = {chr(b) if b < 128 else f"<0x{b:02X}>": BYTE_BASE + b for b in range(256)}
        vocab.update(self.special)
        return vocab

    def __call__(self, text: str, padding: bool = False, **_: Any) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text)}


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, path: str, *args: Any, **kwargs: Any) -> StandInTokenizer:
        cfg = Path(path) / "tokenizer_config.json"
        if not cfg.is_file():
            raise OSError(f"Can't load tokenizer for '{path}': no tokenizer files in it")
        data = json.loads(cfg.read_text(encoding="utf-8"))
        spec = data.get("standin_tokenizer")
        if not isinstance(spec, dict):
            raise OSError(f"{cfg} is not a stand-in tokenizer config")
        return StandInTokenizer(spec.get("special_tokens", {}), spec.get("bos_token"))


__all__ = ["AutoTokenizer", "StandInTokenizer"]
