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
    return "\n".join([*head, *body, *_results(tables), ""])


__all__ = ["methods_md"]
