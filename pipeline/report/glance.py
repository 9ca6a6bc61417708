"""The report's first page: per trace, the answer to its cost question in a sentence a
cluster owner acts on, what it buys, and the caveat (pure functions of a trace's headline).

The long headline (:mod:`.headline`) gives every figure; this gives the decision.  Per
answer mode: on an elastic cluster, the setting to use and what it saves per month, with the
measures it makes worse; on a fixed cluster, what differs in the work, since the bill cannot;
on a replay run until every job ended, how much sooner the same machines are free, never
called a saving.
"""

from __future__ import annotations

import polars as pl

from pipeline.report.headline import (
    DRAINED,
    FIXED,
    MONTH_DAYS,
    Headline,
    change_text,
    fact,
    makespan_fact,
    penalty,
    setting_name,
    time_text,
    usd,
    work_facts,
)
from pipeline.report.section import Glance

WORSE = 0.10  # a measure this much worse than the status quo's is named as a caveat


def answer_glance(answer: Headline, baseline: str, tolerance: float) -> Glance | None:
    """The trace's cost question answered on the first page (None without a status quo)."""
    ref = answer.reference
    if ref is None:
        return None
    choices = answer.settings.filter(~pl.col("reference"))
    one_seed = " One seed: no spread across seeds measured." if _seeds(choices) == 1 else ""
    if answer.mode == FIXED:
        return Glance("What differs between the settings?", _fixed(choices, ref, baseline),
                      "Fixed cluster only: every setting pays for the same machines, so no "
                      "saving can be shown (add an elastic cluster to the sweep)." + one_seed)
    if answer.mode == DRAINED:
        return _drained(choices, ref, baseline, one_seed)
    tol = f"{100 * tolerance:.0f}%"
    choice = answer.choice
    if choice is None or choice["label"] == ref["label"] or choice["cost_saved_usd"] <= 0:
        cheapest = choices.sort(["cost_usd", "label"]).row(0, named=True)
        caveat = ("" if cheapest["label"] == ref["label"] or cheapest["cost_saved_usd"] <= 0
                  else f"The cheapest, {setting_name(cheapest)}, would save "
                       f"{cheapest['cost_saved_pct']:.1f}% but {penalty(cheapest, tolerance)}.")
        return Glance("Which setting is cheapest without slowing the work?",
                      f"Keep {baseline}: no setting saves money and keeps p95 job completion "
                      f"within {tol} and the work left undone no larger.",
                      (caveat + one_seed).strip() or "None.")
    price = ref.get("price_per_hour")
    at = f" at ${float(price):.3g} per node-hour" if price else ""
    return Glance(
        "Which setting is cheapest without slowing the work?",
        f"Use {setting_name(choice)}: it saves {choice['cost_saved_pct']:.1f}% of the "
        f"status quo's cost, {usd(choice['saved_usd_per_day'] * MONTH_DAYS)} per 30-day "
        f"month of this workload{at}.",
        _worse(choice, ref) + one_seed)


def _seeds(choices: pl.DataFrame) -> int:
    return int(choices["seeds"].max() or 1) if "seeds" in choices.columns else 1


def _worse(choice: dict[str, object], ref: dict[str, object]) -> str:
    """What the chosen setting makes worse than the status quo, by more than :data:`WORSE`."""
    found = []
    wait, ref_wait = choice.get("wait_p95_s"), ref.get("wait_p95_s")
    if wait is not None and ref_wait is not None and float(wait) > float(ref_wait) * (1 + WORSE):
        found.append(f"tasks wait {time_text(wait)} at p95 instead of {time_text(ref_wait)}")
    fair, ref_fair = choice.get("jain_fairness"), ref.get("jain_fairness")
    if fair is not None and ref_fair is not None and float(fair) < float(ref_fair) - 0.02:
        found.append(f"fairness {float(fair):.2f} instead of {float(ref_fair):.2f}")
    jct = f"p95 job completion {change_text(choice.get('jct_p95_change_pct'))}"
    if not found:
        return f"Nothing measured is worse by more than {WORSE:.0%} ({jct})."
    return _sentence_case("; ".join([*found, jct])) + "."


def _sentence_case(text: str) -> str:
    """``text`` with its first letter upper case, but ``p95`` spelt as it is."""
    return text if text.startswith("p95") else text[:1].upper() + text[1:]


def _fixed(choices: pl.DataFrame, ref: dict[str, object], baseline: str) -> str:
    """On one fixed cluster: the setting that does the work best, or keep the status quo."""
    job_and_wait = work_facts(choices, ref, baseline, drained=True)  # not the work left
    better = [text for beats, text in job_and_wait if beats]
    if not better:
        return (f"Keep {baseline}: no setting beats it by 1% or more on p95 job completion "
                "or p95 wait.")
    return "; ".join(better) + "."  # starts with a setting's name


def _drained(choices: pl.DataFrame, ref: dict[str, object], baseline: str,
             one_seed: str) -> Glance:
    """Run until every job ended: how much sooner the machines are free, not a saving."""
    caveat = ("Every setting ran until its last job ended on the same machines: a shorter "
              "run frees them sooner, which is worth money only if other work uses them."
              + one_seed)
    ends = makespan_fact(choices, ref, baseline)
    if ends is None or not ends[0]:
        return Glance("Which setting finishes the same work soonest?",
                      f"Keep {baseline}: no setting ends the last job sooner.", caveat)
    wait = fact(choices, ref, baseline, "wait_p95_s", "starts jobs soonest", "p95 wait")
    also = f"; {wait[1]}" if wait and wait[0] else ""
    return Glance("Which setting finishes the same work soonest?", f"{ends[1]}{also}.", caveat)
