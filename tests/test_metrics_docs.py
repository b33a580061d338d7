"""docs/metrics.md read against the code: the table of scores (names, columns, needs, tier,
version, license, default set), every limit, and the hub tier's offline message are the ones
the code has. Needs no model: the registry imports no model package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backends.errors import ModelUnavailable
from evaluation.metrics import ALL_INFO, DEFAULT, HubConfig
from evaluation.metrics.audio import MAX_FILE_BYTES, MAX_SECONDS
from evaluation.metrics.files import MAX_FILES, MAX_TEXTS_BYTES
from evaluation.metrics.hub import WhisperWer
from evaluation.metrics.registry import DEFAULT_IF

DOC = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text(encoding="utf-8")
NEEDS = {
    "-": frozenset(),
    "text": frozenset({"text"}),
    "reference voice": frozenset({"reference_voice"}),
}


def table_rows() -> dict[str, list[str]]:
    section = DOC.split("## The scores", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells
    return rows


def test_the_table_of_scores_is_the_registry():
    rows = table_rows()
    assert list(rows) == list(ALL_INFO)
    for name, (_, cols, needs, tier, version, lic, default) in rows.items():
        info = ALL_INFO[name]
        assert [c.strip(" `") for c in cols.split(",")] == list(info.columns), name
        assert NEEDS[needs] == info.needs, name
        assert (tier, version, lic) == (info.tier, info.version, info.license), name
        flag = next(
            (
                f"with `{o}`"
                for n, o in (("words", "--texts"), ("speaker", "--reference-voice"))
                if n == name
            ),
            None,
        )
        assert default == ("yes" if name in DEFAULT else flag or "no"), name
    assert set(DEFAULT_IF.values()) == {"words", "speaker"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (r"at most (\d+) MiB on disk", MAX_FILE_BYTES // 2**20),
        (r"at most (\d+) s of audio", int(MAX_SECONDS)),
        (r"`--texts` is at most (\d+) MiB", MAX_TEXTS_BYTES // 2**20),
        (r"at most ([\d,]+) files", MAX_FILES),
    ],
)
def test_every_limit_in_the_docs_is_the_codes(text, value):
    found = re.search(text, DOC)
    assert found, text
    assert int(found.group(1).replace(",", "")) == value


def test_the_documented_offline_message_is_the_one_printed():
    with pytest.raises(ModelUnavailable) as e:
        WhisperWer(HubConfig()).folder()
    assert f"listenlab metrics: error: {e.value}" in DOC


def test_the_documented_numbers_are_the_benchmarks():
    """The correlation and speed tables in docs/metrics.md are the ones in
    benchmarks/results/metrics.json (re-render both together after a new run)."""
    import json

    res = json.loads(
        (Path(__file__).resolve().parents[1] / "benchmarks/results/metrics.json").read_text()
    )
    p835 = res["p835"]
    for c, r in p835["correlation"].items():
        pf, pc = r["per_file"], r["per_condition"]
        row = f"| `{c}` | {pf['pearson']:.3f} | {pf['spearman']:.3f} | {pc['pearson']:.3f} | {pc['spearman']:.3f} |"
        assert row in DOC, row
    first = p835["runs"]["default_first"]
    row = f"| default set, first run | {first['wall_s']:.1f} s | {first['cpu_s']:.1f} s | {first['x_real_time']:.2f} |"
    assert row in DOC, row
    assert (
        f"peak resident memory of the whole benchmark process was {res['peak_rss_mib']:.0f} MiB"
        in DOC
    )
