"""``methods.md``: a test's export written as the methods and results of a paper.

Why prose beside ``study.json``: a reader should be able to write the methods section from one
file. Every sentence here is filled from ``study.json`` (:func:`app.listening.export.study`)
and the results tables, so it says what was run, with its numbers, and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evaluation.listening.kinds import KINDS

if TYPE_CHECKING:
    import pandas as pd


def _design(st: dict[str, Any]) -> list[str]:
    d = st["design"]
    systems = ", ".join(s["name"] if isinstance(s, dict) else str(s) for s in d["systems"])
    lines = [
        "## Design",
        "",
        f"- Test kind: {d['kind']}; systems: {systems}; {len(d['prompts'])} prompts.",
        f"- Each rater rated {d['items_per_rater']} items (asked: {d['items_per_rater_asked']})"
        f" and {d['check_items_per_rater']} check items, in a Latin-square design "
        f"({d['design_rows']} distinct rows; every cell equally often at a multiple of "
        f"{d['raters_for_full_balance']} raters who finish), order shuffled per rater "
        f"(seed {d['seed']}).",
        f"- Familiarisation before the first item: {'yes' if d['familiarisation'] else 'no'}.",
    ]
    if d.get("reference"):
        lines.append(f"- Reference (MUSHRA): {d['reference']}.")
    return lines


def _stimuli(st: dict[str, Any]) -> list[str]:
    p = st["playback"]
    stim = st["stimuli"]
    gains = [s["gain_db"] for s in stim if s["gain_db"] is not None]
    capped = sum(s["limited_by_true_peak"] for s in stim)
    level = (
        f"normalised to {p['target_lufs']:g} LUFS ({p['loudness_method']}; ceiling "
        f"{p['ceiling_dbtp']:g} dBTP), gains {min(gains):+.1f} to {max(gains):+.1f} dB, "
        f"{capped} of {len(stim)} capped by the true-peak ceiling"
        if p["normalised"] and gains
        else "played at the levels they came with (no normalisation)"
    )
    return [
        "## Stimuli and playback",
        "",
        f"- {len(stim)} stimuli (file names and SHA-256 in study.json), {level}.",
        f"- Every stimulus reached the browser as {p['sample_rate']} Hz, "
        f"{'stereo' if p['channels'] == 2 else 'mono'}, in 100 ms frames, through the Web "
        "Audio API.",
    ]


def _texts(st: dict[str, Any]) -> list[str]:
    t = st["texts"]
    out = [
        "## What raters read",
        "",
        f"- Title: {t['title']}",
        f"- Consent{' (the default text)' if t['consent_is_default'] else ''}: {t['consent']}",
        f"- Instructions: {t['instructions']}",
    ]
    if t["admin_instructions"]:
        out.append(f"- {t['admin_instructions_label']} {t['admin_instructions']}")
    sc = t["scale"]
    labels = sc.get("labels") or [[lo, f"{lo}-{hi} {n}"] for lo, hi, n in sc.get("bands", [])]
    out.append(
        f"- Question: {sc['question']} Answers: " + "; ".join(f"{v}: {n}" for v, n in labels)
    )
    if t["screen"]:
        out.append(f"- Headphone screen: {t['screen']['intro']}")
        out += [f"  - {k}: {q}" for k, q in t["screen"]["questions"].items()]
    if t["questionnaire"]:
        qs = t["questionnaire"]["questions"]
        out.append("- Questionnaire: " + "; ".join(q["question"] for q in qs))
    return out


def _raters(st: dict[str, Any]) -> list[str]:
    r = st["raters"]
    s = st["screening"]
    hp = s["headphone_screen"]
    ex = [x for x in r if x["excluded"]]
    lines = [
        "## Raters and screening",
        "",
        f"- {len(r)} raters joined, {sum(bool(x['finished']) for x in r)} finished, "
        f"{len(ex)} excluded.",
        f"- Headphone screen: {hp['mode']}"
        + (
            f", {hp['trials_per_test']} trials, pass {hp['pass']}, one attempt"
            if hp["pass"]
            else ""
        ),
    ]
    rule = next((a["method"] for a in st["analysis"] if a["table"] == "raters"), "")
    if rule:  # the exclusion rule, as the results applied it (the test kind's own)
        lines.append(f"- A rater was excluded from the results on: {rule}.")
    checks = s.get(f"{st['test']['kind']}_rules") or {}
    if checks:  # how each check item is judged: what the rule above counts
        judged = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in checks.items())
        lines.append(f"- How the check items were judged: {judged}.")
    code = s.get("excluded_raters")
    if code:
        lines.append(f"- At the end: {code}.")
    lines += [f"- Excluded {x['rater_id']}: {x['reasons']}" for x in ex]
    return lines


def _results(tables: dict[str, pd.DataFrame]) -> list[str]:
    out = ["## Results", ""]
    for kind in KINDS.values():  # each kind words its own tables (only the test's has any)
        out += kind.result_lines(tables)
    m = tables.get("methods")
    if m is not None and not m.empty:
        out += ["", "## Analysis", ""]
        out += [
            f"- {x['table']}: {x['method']}"
            + (f" Assumes: {x['assumes']}." if x["assumes"] else "")
            for _, x in m.iterrows()
            if x["method"]
        ]
    return out


P800_2 = "ITU-T P.800.2 (07/2016), clause 8: the items a report of a listening test gives"
"""What the reporting items follow."""
REPORTING_COLUMNS = {
    "results/p800_2.csv": {
        "item": "the reporting item: votes, raters (per condition), scale_question, "
        "scale_label (condition: the answer's value), anchor, raters_joined, "
        "raters_finished, raters_excluded, interval_method, interval_assumes",
        "condition": "the condition (system, MUSHRA condition or A/B pair) of a per-condition "
        "item, the value of a scale label, else empty",
        "value": "the item's number or words",
    }
}
"""``results/p800_2.csv`` in the export's column dictionary."""
ANCHOR_WORDS = {
    "anchor": "low anchor: a degraded copy of a take (3.5 kHz low-pass, clicks and a gap), "
    "expected rating {expected}",
    "gold": "high anchor (gold): a natural recording or an admin-marked known-good clip, "
    "expected rating {expected}",
    "trap": "trap: a stimulus with a spoken instruction, expected answer {expected}",
}
"""How a check stimulus of each kind is named among the anchors (MUSHRA's low-pass anchors
are named by their cutoff)."""


def anchors(st: dict[str, Any]) -> list[str]:
    """The anchors and check stimuli the test played, one line each with their count."""
    from collections import Counter

    seen: Counter[str] = Counter()
    for s in st["stimuli"]:
        if s.get("anchor") in ("low", "mid") and s.get("lowpass_hz"):  # MUSHRA's
            seen[f"{s['anchor']} anchor: the reference low-passed at {s['lowpass_hz']:g} Hz"] += 1
        elif s["kind"] in ANCHOR_WORDS:
            expected = {"anchor": "1", "gold": "5", "trap": "2"}[s["kind"]]
            seen[ANCHOR_WORDS[s["kind"]].format(expected=expected)] += 1
    out = [f"{what} ({n} stimuli)" for what, n in sorted(seen.items())]
    if st["design"].get("reference"):
        out.append(f"hidden reference: {st['design']['reference']}")
    return out or ["none (the test played no anchor or check stimulus)"]


def count(value: Any) -> int | str:
    """A whole number of a results row, or empty when the table has none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return ""


def reporting_frame(
    st: dict[str, Any], tables: dict[str, pd.DataFrame], ratings: pd.DataFrame | None = None
) -> pd.DataFrame:
    """P.800.2's reporting items as rows ``item, condition, value`` (``results/p800_2.csv``):
    votes and raters per condition (the ratings the main table counts, screened raters out),
    the scale's question and labels, the anchors, the raters, the intervals' method."""
    import pandas as pd

    from app.listening.figures import forest

    rows: list[tuple[str, str, Any]] = []
    f = forest(tables)
    if f is not None:
        for _, x in f.numbers.sort_values("row", key=lambda c: c.astype(str)).iterrows():
            rows.append(("votes", str(x["row"]), count(x.get("n"))))
            if "raters" in x:
                rows.append(("raters", str(x["row"]), count(x["raters"])))
    sc = st["texts"]["scale"]
    rows.append(("scale_question", "", sc["question"]))
    labels = sc.get("labels") or [[lo, f"{lo}-{hi} {n}"] for lo, hi, n in sc.get("bands", [])]
    rows += [("scale_label", str(v), str(n)) for v, n in labels]
    rows += [("anchor", "", a) for a in anchors(st)]
    r = st["raters"]
    rows.append(("raters_joined", "", len(r)))
    rows.append(("raters_finished", "", sum(bool(x["finished"]) for x in r)))
    rows.append(("raters_excluded", "", sum(bool(x["excluded"]) for x in r)))
    main = next((a for a in st["analysis"] if a["table"] == (f and f.source)), None)
    rows.append(("interval_method", "", main["method"] if main else ""))
    rows.append(("interval_assumes", "", main["assumes"] if main else ""))
    return pd.DataFrame(rows, columns=["item", "condition", "value"])


def reporting(st: dict[str, Any], tables: dict[str, pd.DataFrame]) -> list[str]:
    """``methods.md``'s P.800.2 section, from :func:`reporting_frame`."""
    df = reporting_frame(st, tables)
    get = {k: g for k, g in df.groupby("item", sort=False)}
    out = ["## Reporting items (ITU-T P.800.2)", "", f"Following {P800_2}.", ""]
    if "votes" in get:
        raters = (
            dict(zip(get["raters"]["condition"], get["raters"]["value"], strict=True))
            if ("raters" in get)
            else {}
        )
        out.append("- Votes and raters per condition (screened raters out):")
        out += [
            f"  - {x['condition']}: {x['value']} votes"
            + (f" from {raters[x['condition']]} raters" if x["condition"] in raters else "")
            for _, x in get["votes"].iterrows()
        ]
    one = {k: g["value"].iloc[0] for k, g in get.items() if len(g) == 1}
    out.append(f"- Scale: {one.get('scale_question', '')}")
    out += (
        [
            "- Scale labels: "
            + "; ".join(
                f"{x['condition']} = {x['value']}" for _, x in get["scale_label"].iterrows()
            )
        ]
        if "scale_label" in get
        else []
    )
    out.append("- Anchors: " + "; ".join(get["anchor"]["value"].astype(str)) + ".")
    out.append(
        f"- Raters: {one['raters_joined']} joined, {one['raters_finished']} finished, "
        f"{one['raters_excluded']} excluded."
    )
    out.append(f"- Intervals: {one.get('interval_method') or 'none'}.")
    return out


def methods_md(st: dict[str, Any], tables: dict[str, pd.DataFrame]) -> str:
    """The methods and the main results of one test, from ``study.json`` and its tables."""
    head = [
        f"# {st['texts']['title']}: methods and results",
        "",
        f"Run with listenlab {st['listenlab_version']} (cite: {st['cite']}); test "
        f"{st['test']['test_id']} ({st['test']['kind']}, {st['test']['status']}).",
        "",
    ]
    body = [*_design(st), "", *_stimuli(st), "", *_texts(st), "", *_raters(st), ""]
    body += [*reporting(st, tables), ""]
    return "\n".join([*head, *body, *_results(tables), ""])


__all__ = ["P800_2", "REPORTING_COLUMNS", "anchors", "methods_md", "reporting", "reporting_frame"]
