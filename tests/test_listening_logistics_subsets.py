"""Per-participant subsets (issue #42): each rater rates K of a test's S x P stimuli
(``items_per_rater``, rounded down to a multiple of S when K >= S), and the join's row rule
(:func:`evaluation.listening.design.choose_row`) keeps every stimulus within 2 ratings of
every other at any number of raters, all equal at a multiple of the design's rows. The
numbers the docs state ("Per-participant subsets") are these."""

from __future__ import annotations

import pytest

from evaluation.listening.design import (
    Design,
    RaterRow,
    all_row_cells,
    choose_row,
    full_balance_raters,
    rows,
)


@pytest.mark.parametrize(
    ("systems", "prompts", "k", "items", "balanced_at"),
    [(4, 10, 8, 8, 20), (3, 12, 5, 3, 12), (6, 20, 4, 4, 30), (13, 10, 10, 10, 13)],
)
def test_each_rater_a_subset_every_stimulus_about_as_often(systems, prompts, k, items, balanced_at):
    d = Design(
        "mos",
        tuple(f"s{i}" for i in range(systems)),
        tuple(f"p{i}" for i in range(prompts)),
        k,
        screening=False,
        partial_rows=True,
    ).validate()
    assert d.balanced_items == items
    assert rows(d) == full_balance_raters(d) == balanced_at
    cells = all_row_cells(d)
    assert all(len(set(cs)) == len(cs) == items for cs in cells)  # no stimulus twice
    raters: list[RaterRow] = []
    count = {c: 0 for cs in cells for c in cs}
    assert len(count) == systems * prompts
    for n in range(1, 3 * balanced_at + 1):
        row = choose_row(d, raters)
        raters.append(RaterRow(row, True))
        for c in cells[row % len(cells)]:
            count[c] += 1
        assert max(count.values()) - min(count.values()) <= 2, n
        if n % balanced_at == 0:
            assert set(count.values()) == {n * items // (systems * prompts)}


def test_the_cli_flags_make_the_spec_fields(tmp_path):
    import json

    from app.cli import build_parser
    from app.listening.cli import spec_from_args
    from app.listening.designer import TestSpec

    pages = [{"at": "end", "fields": [{"key": "c", "label": "Comments", "type": "text"}]}]
    qfile = tmp_path / "q.json"
    qfile.write_text(json.dumps(pages))
    argv = [
        "test",
        "create",
        "--system",
        "a=piper",
        "--items-per-rater",
        "4",
        "--target-valid",
        "3",
        "--break-after",
        "2",
        "--break-min",
        "30",
        "--questionnaire-file",
        str(qfile),
    ]
    spec = spec_from_args(build_parser("test").parse_args(argv))
    assert (spec["target_valid"], spec["break_after"], spec["break_min_s"]) == (3, 2, 30.0)
    ts = TestSpec.from_dict(spec)
    assert (
        ts.questionnaire[0]["at"] == "end" and ts.questionnaire[0]["fields"][0]["max_length"] == 500
    )
