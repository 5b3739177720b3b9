"""Temporal questions: "what did I write about X last month" filters by the notes'
``modified`` date (the frontmatter's, else the file's mtime: ``sync/props.py``).

Why a handful of phrases and not a date parser: the phrases people put in a question
about their own notes are few (today, yesterday, this or last week/month/year, the
last N days/weeks/months, in 2024), and a filter read wrongly out of a question would
hide the answer; a phrase that is not one of these leaves the question unfiltered.
The filter is said in the answer (``when``), so a user sees why notes are missing.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from wikid.sync.props import Where

_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30}
_LAST_N = re.compile(
    r"\b(?:in |over |during )?(?:the )?(?:last|past) (\d{1,4}) (days?|weeks?|months?)\b", re.I
)
_NAMED = re.compile(
    r"\b(today|yesterday|(?:this|last|past) (?:week|month|year)|in (?:19|20)\d\d)\b", re.I
)


@dataclass(frozen=True)
class When:
    """The phrase a question dates itself with, and the half-open span it names (UTC)."""

    phrase: str
    start: dt.datetime
    end: dt.datetime

    def filters(self) -> list[Where]:
        return [
            Where("modified", ">=", self.start.isoformat(), self.start.timestamp(), False),
            Where("modified", "<", self.end.isoformat(), self.end.timestamp(), False),
        ]

    def said(self, notes: int) -> dict[str, object]:
        """What the answer says of it (``explain`` and ``when``)."""
        return {
            "phrase": self.phrase,
            "modified_from": self.start.date().isoformat(),
            "modified_before": self.end.date().isoformat(),
            "by": "the frontmatter's modified date, else the file's mtime",
            "notes": notes,
        }


def when(question: str, now: dt.datetime | None = None) -> When | None:
    """The span the question asks about, or None when it names none."""
    now = now or dt.datetime.now(dt.UTC)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    m = _LAST_N.search(question)
    if m:
        days = int(m.group(1)) * _UNITS[m.group(2).lower()]
        return When(m.group(0).strip(), today - dt.timedelta(days=days - 1), _tomorrow(today))
    m = _NAMED.search(question)
    if m is None:
        return None
    phrase = m.group(1).lower()
    if phrase == "today":
        return When(phrase, today, _tomorrow(today))
    if phrase == "yesterday":
        return When(phrase, today - dt.timedelta(days=1), today)
    if phrase.startswith("in "):
        year = int(phrase[3:])
        return When(phrase, today.replace(year=year, month=1, day=1), _jan1(year + 1, today))
    which, unit = phrase.split()
    start = _start_of(unit, today)
    if which == "this":
        return When(phrase, start, _tomorrow(today))
    if which == "past":  # the past week: the seven days up to today
        days = {"week": 7, "month": 30, "year": 365}[unit]
        return When(phrase, today - dt.timedelta(days=days - 1), _tomorrow(today))
    previous = _start_of(unit, start - dt.timedelta(days=1))
    return When(phrase, previous, start)


def _tomorrow(today: dt.datetime) -> dt.datetime:
    return today + dt.timedelta(days=1)


def _jan1(year: int, today: dt.datetime) -> dt.datetime:
    return today.replace(year=year, month=1, day=1)


def _start_of(unit: str, day: dt.datetime) -> dt.datetime:
    if unit == "week":  # weeks start on Monday (ISO)
        return day - dt.timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    return day.replace(month=1, day=1)
