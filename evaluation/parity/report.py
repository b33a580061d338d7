"""A parity run's outputs: ``parity.json`` (every number), ``parity.html`` (one self-contained
page) and ``parity.md`` (the summary to paste into a pull request), with every take's audio.

Why three: the JSON is what a CI job and ``--baseline`` read, the page is what a reviewer opens
(the verdict, the table with intervals, the prompts that lost most with both sides' audio side
by side as embedded data, the chunk schedules), and the Markdown is what a PR comment holds.
Every text that came from outside (prompts, specs, transcripts, a server's report) is escaped.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path
from typing import Any

from evaluation.parity.compare import CONFIDENCE, Comparison
from evaluation.parity.measures import BY_NAME
from evaluation.parity.records import ParityResult, PromptRow
from evaluation.parity.sides import save_side, take_path

WORST_PLAYERS = 5
"""Prompts whose audio the page embeds (the largest losses first)."""
ROW_MEASURES = ("wer", "speaker_sim", "predicted_mos", "ms_per_char", "glitches")
"""The differences each prompt's row shows (every one is in the JSON)."""
VERDICT_COLOURS = {"pass": "#187a2f", "not shown worse": "#8a5a00", "fail": "#b3261e"}
COLOURS = {"pass": "#187a2f", "reported": "#555", "worse": "#b3261e", "unsure": "#8a5a00"}
e = html.escape


def verdict_words(result: ParityResult) -> str:
    """The verdict in a sentence, with what more prompts would settle."""
    if result.verdict == "pass":
        return "Parity is shown on every decided measure: no interval reaches past its margin."
    if result.verdict == "fail":
        return "The candidate fails: " + "; ".join(result.reasons())
    need = [
        f"{c.measure} ({c.prompts_needed} prompts)" if c.prompts_needed else c.measure
        for c in result.unsure
    ]
    return (
        "No measure is shown worse than its margin, but parity is not shown on "
        + ", ".join(need)
        + ": their intervals reach past the margin (more prompts, or more takes, would settle "
        "it; with --strict this fails)."
    )


def fmt(v: Any, digits: int = 3, sign: bool = False) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def interval_text(c: Comparison) -> str:
    d = BY_NAME[c.measure].digits
    if not math.isfinite(c.low):
        return "-"
    return f"[{fmt(c.low, d, True)}, {fmt(c.high, d, True)}]"


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def interval_plot(result: ParityResult) -> str | None:
    """Each decided measure's interval in margins (the margin at -1 / +1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = [c for c in result.comparisons if c.margin and math.isfinite(c.low)]
    if not cs:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(cs) + 1))
    for i, c in enumerate(cs):
        ax.plot([c.low / c.margin, c.high / c.margin], [i, i], color=COLOURS[c.decision], lw=3)
        ax.plot([c.delta / c.margin], [i], "o", color=COLOURS[c.decision])
    ax.axvline(0, color="0.6", lw=0.8)
    for x in (-1, 1):
        ax.axvline(x, color="#b3261e", lw=0.8, ls="--")
    ax.set_yticks(range(len(cs)), [c.measure for c in cs])
    ax.invert_yaxis()
    ax.set_xlabel("candidate - reference, in margins (90 % interval)")
    return _png(fig)


def schedule_plot(result: ParityResult) -> str | None:
    """Audio received against wall time, every take of each rendered side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sides = [
        s
        for s in result.sides.values()
        if any(len(t.chunks) > 1 or t.total_ms for t in s.takes.values())
    ]
    if not sides:
        return None
    fig, axes = plt.subplots(
        1, len(sides), figsize=(4.2 * len(sides), 3), squeeze=False, sharey=True
    )
    for ax, s in zip(axes[0], sides, strict=True):
        for t in s.takes.values():
            xs = [0.0] + [c.arrival_ms / 1000 for c in t.chunks]
            ys = [0.0] + [(c.offset + c.frames) / t.sample_rate for c in t.chunks]
            ax.step(xs, ys, where="post", lw=1, marker=".", ms=3)
        lim = min(ax.get_xlim()[1], ax.get_ylim()[1])
        ax.plot([0, lim], [0, lim], color="0.6", lw=0.7, ls=":", label="real time")
        ax.set_title(f"{s.role}: audio received", fontsize=9)
        ax.set_xlabel("wall time (s)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("audio received (s)")
    axes[0][0].legend(fontsize=7, loc="upper left")
    return _png(fig)


def wav_data(result: ParityResult, role: str, prompt_id: str) -> str | None:
    """The first take of a prompt on one side as a ``data:audio/wav`` URL (None: no take)."""
    from backends.audio import encode_audio

    take = result.sides.get(role) and result.sides[role].takes.get((prompt_id, 1))
    if not take:
        return None
    wav = encode_audio(take.audio, take.sample_rate)
    return "data:audio/wav;base64," + base64.b64encode(wav).decode("ascii")


def _tr(cells: list[str], cls: str = "") -> str:
    """A row of already-escaped cells."""
    return (
        (f"<tr class='{e(cls)}'>" if cls else "<tr>")
        + "".join(f"<td>{c}</td>" for c in cells)
        + "</tr>"
    )


def measure_rows(result: ParityResult) -> str:
    out = []
    for c in result.comparisons:
        m = BY_NAME[c.measure]
        d = m.digits
        out.append(
            _tr(
                [
                    f"<b>{e(m.name)}</b><br><small>{e(m.label)}</small>",
                    e(m.direction),
                    e(fmt(c.reference, d)),
                    e(fmt(c.candidate, d)),
                    e(f"{fmt(c.delta, d, True)} {m.delta_unit}"),
                    e(interval_text(c)),
                    e("-" if c.margin is None else f"{c.margin:g}"),
                    str(c.n),
                    f"<span class='d {e(c.decision.replace(' ', '_'))}'>{e(c.decision)}</span>",
                    e("-" if c.prompts_needed is None else str(c.prompts_needed)),
                ],
                c.decision.replace(" ", "_"),
            )
        )
    return "".join(out)


def prompt_rows(rows: list[PromptRow]) -> str:
    out = []
    for r in rows:
        cells = [e(r.prompt_id), e(r.text), e(r.worst or "-"), e(fmt(r.loss, 2))]
        cells += [e(fmt(r.delta.get(k), BY_NAME[k].digits, True)) for k in ROW_MEASURES]
        out.append(_tr(cells))
    return "".join(out)


def players(result: ParityResult) -> str:
    """Both sides' audio for the prompts that lost most (embedded, so the page stands alone)."""
    blocks = []
    for r in result.rows[:WORST_PLAYERS]:
        audios = []
        for role in ("reference", "candidate"):
            src = wav_data(result, role, r.prompt_id)
            player = (
                f"<audio controls preload='auto' data-role='{role}' src='{src}'></audio>"
                if src
                else "<em>no take</em>"
            )  # src: the base64 alphabet only
            audios.append(f"<div><small>{role}</small><br>{player}</div>")
        blocks.append(
            f"<div class='pair' data-prompt='{e(r.prompt_id)}'><p><b>{e(r.prompt_id)}</b> "
            f"(loss {e(fmt(r.loss, 2))} margins on {e(r.worst or '-')}): {e(r.text)}</p>"
            f"<div class='sides'>{''.join(audios)}</div></div>"
        )
    return "".join(blocks)


def side_rows(result: ParityResult) -> str:
    out = []
    for s in (result.reference, result.candidate):
        srv = s.server.get("server") or {}
        out.append(
            _tr(
                [
                    e(s.role),
                    f"<code>{e(s.source)}</code>",
                    e(s.kind),
                    str(s.takes_per_prompt),
                    e(str(s.deterministic)),
                    e(fmt(s.load_ms, 0)),
                    e(str(srv.get("version") or "-")),
                    e(fmt(s.server.get("memory_mib"), 0)),
                    e(f"{len(s.errors)} failed" if s.errors else "none"),
                ]
            )
        )
    return "".join(out)


STYLE = """body{font:14px system-ui,sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0}td,th{border-bottom:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}.v{font-size:1.6em;font-weight:bold}.d{font-weight:bold}
.d.pass{color:#187a2f}.d.worse{color:#b3261e}.d.unsure{color:#8a5a00}.d.too_few{color:#b3261e}
.d.reported{color:#555}.sides{display:flex;gap:2em}.pair{margin:1em 0}img{max-width:100%}"""


def render_html(result: ParityResult) -> str:
    """The page (see the module docstring); plots and audio inlined, every text escaped."""
    plot, sched = interval_plot(result), schedule_plot(result)
    img = "".join(
        f'<img alt="{k}" src="data:image/png;base64,{v}">'
        for k, v in (("intervals", plot), ("schedules", sched))
        if v
    )
    reasons = "".join(f"<li>{e(x)}</li>" for x in result.reasons()) or "<li>none</li>"
    notes = "".join(f"<li>{e(n)}</li>" for n in result.tiers.get("notes", []))
    mem = result.memory
    head = "".join(f"<th>{e(BY_NAME[k].name)} &Delta;</th>" for k in ROW_MEASURES)
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>listenlab parity: {e(result.candidate.source)} vs {e(result.reference.source)}</title>
<style>{STYLE}</style></head><body>
<h1>listenlab parity</h1>
<p class="v" style="color:{VERDICT_COLOURS[result.verdict]}" id="verdict">{e(result.verdict.upper())}</p>
<p>{e(verdict_words(result))}</p>
<p>Candidate <code>{e(result.candidate.source)}</code> against reference
<code>{e(result.reference.source)}</code>: {len(result.prompts)} prompt(s), run {e(result.run_id)},
{e(result.started_at)}, {result.seconds:.1f} s.</p>
<h2>What fails it</h2><ul id="reasons">{reasons}</ul>
<h2>Sides</h2>
<table><tr><th>side</th><th>source</th><th>kind</th><th>takes per prompt</th><th>deterministic</th>
<th>load ms</th><th>server version</th><th>memory MiB</th><th>renders</th></tr>{side_rows(result)}</table>
<p>Memory: {e(str(mem.get("decision")))} ({e(str(mem.get("note") or fmt(mem.get("delta"), 1, True) + " %"))}).</p>
<h2>Measures</h2>
<p>Each prompt's difference is candidate minus reference (each side's mean over its takes);
the interval is Student's t over the prompts at {CONFIDENCE:.0%}, whose worse end is the
one-sided 95 % bound the margin is held against. "prompts needed": how many prompts give a
candidate as good as the reference a 95 % chance to pass this measure at the spread seen.</p>
<table id="measures"><tr><th>measure</th><th>better</th><th>reference</th><th>candidate</th>
<th>difference</th><th>90 % interval</th><th>margin</th><th>prompts</th><th>decision</th>
<th>prompts needed</th></tr>{measure_rows(result)}</table>
{img}
<h2>The prompts that lost most</h2>{players(result)}
<h2>Every prompt, largest loss first</h2>
<table id="prompts"><tr><th>prompt</th><th>text</th><th>worst measure</th><th>loss (margins)</th>
{head}</tr>{prompt_rows(result.rows)}</table>
<h2>How it was measured</h2>
<ul>{notes}<li>words: {e(result.tiers.get("words", ""))}, speaker: {e(result.tiers.get("speaker", ""))}</li>
<li>versions: <code>{e(json.dumps(result.versions, sort_keys=True))}</code></li>
<li>method: {e(str(result.method.get("interval", "")))}; {e(str(result.method.get("decision", "")))}</li></ul>
</body></html>
"""


def render_markdown(result: ParityResult) -> str:
    """The summary for a pull request: the verdict, the decided measures, what fails it."""
    lines = [
        f"### listenlab parity: {result.verdict.upper()}",
        "",
        _md(verdict_words(result)),
        "",
        f"Candidate `{_md(result.candidate.source)}` against reference "
        f"`{_md(result.reference.source)}`, {len(result.prompts)} prompts, "
        f"{result.candidate.takes_per_prompt} take(s) per prompt; 90 % intervals over prompts.",
        "",
        "| measure | reference | candidate | difference | 90 % interval | margin | decision |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in result.comparisons:
        m = BY_NAME[c.measure]
        d = m.digits
        lines.append(
            f"| {m.name} | {fmt(c.reference, d)} | {fmt(c.candidate, d)} | "
            f"{fmt(c.delta, d, True)} {m.delta_unit} | {interval_text(c)} | "
            f"{'-' if c.margin is None else f'{c.margin:g}'} | {c.decision} |"
        )
    lines += [
        "",
        f"Words: {result.tiers.get('words')}; speaker: {result.tiers.get('speaker')}; "
        f"listenlab {result.versions.get('listenlab')}.",
    ]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """Text safe inside a Markdown table or code span (no pipes, backticks or newlines)."""
    return " ".join(str(text).replace("|", "\\|").replace("`", "'").split())


def write_outputs(result: ParityResult, out_dir: str | Path) -> dict[str, Path]:
    """``audio/<side>/`` (every take, with its timeline), ``parity.json``, ``parity.html`` and
    ``parity.md`` in ``out_dir``; each file written under a temporary name, then renamed."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for role, side in result.sides.items():
        for key, path in save_side(side, out / "audio" / role).items():
            files[f"{role}/{key[0]}/{key[1]}"] = str(path.relative_to(out))
    d = result.to_dict()
    d["audio"] = files
    paths = {"json": out / "parity.json", "html": out / "parity.html", "md": out / "parity.md"}
    for kind, text in (
        ("json", json.dumps(d, indent=1)),
        ("html", render_html(result)),
        ("md", render_markdown(result)),
    ):
        tmp = out / f".{paths[kind].name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(paths[kind])
    return paths


__all__ = [
    "WORST_PLAYERS",
    "interval_plot",
    "render_html",
    "render_markdown",
    "schedule_plot",
    "take_path",
    "write_outputs",
]
