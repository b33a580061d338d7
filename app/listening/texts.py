"""Every text a rater reads, in one place: the page shows these and the export prints them.

Why here and not in the page's script: a methods section must quote what raters saw, word for
word. The rater page receives these texts with its status (``status()["test"]["texts"]``)
and puts them on the page with ``textContent``; the export's ``study.json`` and
``methods.md`` print the same dictionary (:func:`rater_texts`). A test's own texts (title,
consent, the admin's instructions) are added to the built-in ones, never in their place.
"""

from __future__ import annotations

from typing import Any

from evaluation.listening.screening import PASS, TRIALS

INSTRUCTIONS = {
    "mos": "Listen to the whole clip, then rate its overall quality.",
    "ab": "Listen to both A and B (at least 3 s of each), then compare them.",
    "mushra": (
        "Press Play, then switch between the Reference and the numbered clips while it plays "
        "(they stay in step; Loop repeats the part between the two times). Rate each clip "
        "from 0 (Bad) to 100 (Excellent) against the reference; one of them is the reference "
        "itself. Move every slider before you submit."
    ),
    "glitch": "Listen to the whole clip and press G at every glitch you hear (click, gap, repeat…).",
}
"""The built-in instructions of each kind, shown above every item."""
ADMIN_INSTRUCTIONS_LABEL = "From the researcher:"
"""Shown before the test's own instructions (they follow the built-in ones)."""

MOS_LABELS = [[5, "Excellent"], [4, "Good"], [3, "Fair"], [2, "Poor"], [1, "Bad"]]
MOS_QUESTION = "How good is the quality of the speech?"
CMOS_LABELS = [
    [-3, "A much better"],
    [-2, "A better"],
    [-1, "A slightly better"],
    [0, "About the same"],
    [1, "B slightly better"],
    [2, "B better"],
    [3, "B much better"],
]
CMOS_QUESTION = "Compare the quality of B with the quality of A."
FORCED_LABELS = [["a", "A is better"], ["b", "B is better"]]
FORCED_QUESTION = "Which clip has the better quality?"
MUSHRA_BANDS = [
    [80, 100, "Excellent"],
    [60, 80, "Good"],
    [40, 60, "Fair"],
    [20, 40, "Poor"],
    [0, 20, "Bad"],
]
MUSHRA_QUESTION = "Rate each clip from 0 to 100 against the reference."

SCREEN_QUESTION = {
    "antiphase": "Each trial plays three tones. Which tone was the quietest?",
    "huggins": "Each trial plays three noises. One of them has a faint tone in it. Which one?",
}
SCREEN_INTRO = (
    "Put on headphones. This check tells whether you are wearing headphones. It takes one "
    f"attempt: {TRIALS} trials, each played once or a few times, and you need {PASS} of "
    f"{TRIALS} right to go on. Your first answer to each trial counts."
)
SCREEN_LEVEL = "Play a level-setting tone, set a comfortable volume, then leave it."
SCREEN_PASSED = "Headphone check passed ({correct} of {trials} right). The test starts now."
SCREEN_FAILED = (
    "This study needs headphones, and the headphone check did not pass ({correct} of "
    "{trials} right), so the study ends here."
)
FAMILIAR_INTRO = (
    "Listen to these clips: they show the range of what you will hear. You do not rate them."
)
SCREENOUT_HEADING = "Thank you for your time"
DONE_HEADING = "Thank you!"
COUNTER = "Clip {n} of {total}"
"""The progress counter: shown only while rating, it counts every clip the rater rates."""

QUESTIONNAIRE = [
    {
        "key": "device",
        "question": "What are you listening with?",
        "options": ["Headphones", "Earbuds", "Laptop or phone speakers", "Other speakers"],
    },
    {
        "key": "headphone_type",
        "question": "If headphones or earbuds: which kind?",
        "options": ["Over-ear", "On-ear", "In-ear", "Not using headphones"],
    },
    {
        "key": "native_language",
        "question": "What is your native language?",
        "options": ["English", "Other"],
    },
    {
        "key": "age_band",
        "question": "Your age",
        "options": ["18-29", "30-39", "40-49", "50-59", "60 or over", "Prefer not to say"],
    },
]
"""The optional rater questionnaire (ITU-T P.808 asks for the listening device, and the
panel's language and age): multiple choice only, so nothing free-form is stored."""
QUESTIONNAIRE_INTRO = "A few questions about you and how you listen (this is part of the study)."


def scale(kind: str, ab_mode: str = "cmos") -> dict[str, Any]:
    """The question and the answer labels of one kind, as the page shows them."""
    if kind == "mos":
        return {"question": MOS_QUESTION, "labels": MOS_LABELS}
    if kind == "ab" and ab_mode == "forced":
        return {"question": FORCED_QUESTION, "labels": FORCED_LABELS}
    if kind == "ab":
        return {"question": CMOS_QUESTION, "labels": CMOS_LABELS}
    if kind == "mushra":
        return {"question": MUSHRA_QUESTION, "bands": MUSHRA_BANDS}
    return {"question": "Press G (or the Glitch button) at every glitch.", "labels": []}


def rater_texts(kind: str, config: dict[str, Any], consent: str) -> dict[str, Any]:
    """Every text a rater of this test reads, by place (the page's and the export's)."""
    mode = config.get("screening") or "antiphase"
    return {
        "consent": consent,
        "instructions": INSTRUCTIONS.get(kind, ""),
        "admin_instructions": config.get("instructions") or "",
        "admin_instructions_label": ADMIN_INSTRUCTIONS_LABEL,
        "scale": scale(kind, (config.get("design") or {}).get("ab_mode", "cmos")),
        "screen": {
            "intro": SCREEN_INTRO,
            "questions": {k: v for k, v in SCREEN_QUESTION.items() if mode in (k, "both")},
            "level": SCREEN_LEVEL,
            "passed": SCREEN_PASSED,
            "failed": SCREEN_FAILED,
        }
        if mode != "none"
        else None,
        "familiar_intro": FAMILIAR_INTRO,
        "questionnaire": {"intro": QUESTIONNAIRE_INTRO, "questions": QUESTIONNAIRE}
        if config.get("questionnaire")
        else None,
        "counter": COUNTER,
        "screenout_heading": SCREENOUT_HEADING,
        "done_heading": DONE_HEADING,
    }


__all__ = [
    "ADMIN_INSTRUCTIONS_LABEL",
    "CMOS_LABELS",
    "COUNTER",
    "FORCED_LABELS",
    "INSTRUCTIONS",
    "MOS_LABELS",
    "MUSHRA_BANDS",
    "QUESTIONNAIRE",
    "SCREEN_QUESTION",
    "rater_texts",
    "scale",
]
