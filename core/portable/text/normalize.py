"""Text normalization: numbers, dates, currency, units, abbreviations and symbols as the words
that are spoken, before the text is chunked and tokenized.

The models read digits and symbols badly ("$5.20 on 3/4 at 10:30"); every user wrote the same
preprocessing. The number words come from `num2words` (pure Python, runs in Pyodide); the words
around them, names, abbreviations and units of each language are tables in normalize_tables.py.
This module finds the numbers and knows how each kind is read. Every rule is one
regular expression applied once over the text, in a fixed order (URLs and e-mail addresses,
phone numbers, dates, times, currency, percentages, units, ordinals, fractions, plain numbers,
abbreviations, symbols), so the cost is linear in the text; each expression starts only at a token
boundary (a look-behind) so a failed match is not retried inside a run of digits, digit groups
("1 000 000") or letters.

Rules that need a choice (documented in docs/speed-and-normalization.md, "Text normalization"):
- Numbers of more than MAX_DIGITS digits, and digit runs with a leading zero ("007"), are read
  digit by digit; so are phone-like groups ("555-123-4567", "+1 555 123 4567", "555-1234").
- A four-digit number from 1100 to 2099 is read as a year ("nineteen ninety-nine", "twenty ten",
  "two thousand five") after a year word ("in", "since", "by", a month, ...), in a decade ("1990s"),
  in a range of two such numbers, or when no word follows it ("It was 1999."); otherwise it is a
  cardinal ("2010 people").
- Slash dates are month/day/year in English and day/month/year in the other languages; ISO dates
  (2025-03-04) are year-month-day everywhere. Two-digit years are 2000-2049 and 1950-1999.
- English uses "," to group thousands and "." for decimals; the other languages use "," for
  decimals and "." (followed by groups of three digits) or a no-break space to group thousands.
- Decimals are read digit by digit after the point ("three point one four").
- A URL is read without its scheme, query and fragment ("example dot com slash path").
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Pattern, Tuple

from num2words import num2words

from ..errors import TextError
from .lexicon import EMPTY, Lexicon
from .normalize_tables import (
    ABBREVIATIONS,
    CURRENCIES,
    CURRENCY_SYMBOLS,
    EN_CURRENCY,
    EN_MONTH_ABBREVIATIONS,
    EN_SCALES,
    EN_UNITS,
    FEMININE,
    GERMAN_E,
    GERMAN_N,
    LANGUAGE_CODES,
    LANGUAGES,
    MONTHS,
    NUMBER_SIGNS,
    ON_WORDS,
    ORDINAL_SUFFIXES,
    TIME_FORMS,
    WORDS,
    YEAR_WORDS,
    YEN,
)

# Longer numbers are read digit by digit: num2words is slow or raises on huge values, and nobody
# says a sixteen-digit number as a cardinal.
MAX_DIGITS = 15

_TIME_END = r"(?!\w|:\d|[.,]\d)"
_TLDS = "com|org|net|edu|gov|info|io|ai|dev|app|co|uk|eu|de|fr|es|it|nl|pt|be|ch|at"


def language_of_tag(tag: str) -> Optional[str]:
    """The language (one of LANGUAGES) a client's tag names ("fr-FR", "fr", "french"); None for one
    no language here has."""
    first = tag.lower().replace("_", "-").split("-")[0]
    for name, code in LANGUAGE_CODES.items():
        if first in (code, name):
            return name
    return None


def same_language(asked: Optional[str], code: str) -> bool:
    """Whether a language a client asks for ("en", "en_US", "en-GB", "English") is the one whose
    code (LANGUAGE_CODES' values: "en", "fr", ...) is `code`."""
    if not asked:
        return False
    asked = asked.replace("-", "_").lower()
    return asked.split("_")[0] == code or LANGUAGE_CODES.get(asked) == code


def language_of(model_name: str) -> str:
    """The language a catalog model speaks, from its name ("french_24l" -> "french"); English
    for a name that names none."""
    for word in re.split(r"[^a-z]+", model_name.lower()):
        if word in LANGUAGES:
            return word
    return "english"


def normalize_text(text: str, language: str = "english", lexicon: Lexicon = EMPTY, words: bool = True) -> str:
    """`text` as it will be spoken: the lexicon's words respelled (core.portable.text.lexicon), then
    (unless `words` is false) numbers, dates, times, currency, units, abbreviations, symbols, URLs
    and e-mail addresses written out as words of `language` (one of LANGUAGES). Sentence
    punctuation is kept; text with nothing to normalize comes back unchanged."""
    for pattern, speak in _with(lexicon, _rules(language) if words else []):
        text = pattern.sub(_guarded(speak, language), text)
    return text


def _with(lexicon: Lexicon, rules: List[Tuple[Pattern[str], Callable[[re.Match, str], str]]]) -> list:
    return rules if lexicon.rule is None else [lexicon.rule, *rules]


def normalize_aligned(
    text: str, language: str = "english", lexicon: Lexicon = EMPTY, words: bool = True
) -> Tuple[str, List[Tuple[int, int]]]:
    """`normalize_text`, and for each character of its result the span of `text` it comes from:
    a character a rule did not touch, its own; what a rule wrote, the whole span it rewrote (word
    timestamps tell the user's words from what they were read as)."""
    origins = [(i, i + 1) for i in range(len(text))]
    for pattern, speak in _with(lexicon, _rules(language) if words else []):
        replace = _guarded(speak, language)
        out: List[str] = []
        moved: List[Tuple[int, int]] = []
        done = 0
        for match in pattern.finditer(text):
            start, end = match.span()
            written = replace(match)
            out.append(text[done:start])
            moved.extend(origins[done:start])
            if written == match.group(0):
                moved.extend(origins[start:end])
            elif end > start:
                covered = origins[start:end]
                moved.extend([(min(b for b, _ in covered), max(e for _, e in covered))] * len(written))
            else:  # written where nothing was: at the character before
                at = origins[start - 1][1] if start else 0
                moved.extend([(at, at)] * len(written))
            out.append(written)
            done = end
        out.append(text[done:])
        moved.extend(origins[done:])
        text, origins = "".join(out), moved
    return text, origins


def _guarded(speak: Callable[[re.Match, str], str], language: str) -> Callable[[re.Match], str]:
    # A rule that meets a case it cannot read leaves the text as written rather than failing the
    # whole generation (num2words raises on some values and languages).
    def replace(match: re.Match) -> str:
        try:
            return speak(match, language)
        except Exception:  # noqa: BLE001 - any failure keeps the written form
            return match.group(0)

    return replace


# ---------------------------------------------------------------------------------------------
# Number words (all from num2words)


def _n2w(value: int, language: str, to: str = "cardinal") -> str:
    # num2words groups English thousands with commas ("one million, two hundred"); a comma would be
    # read as a pause and could become a chunk boundary.
    return num2words(value, lang=LANGUAGE_CODES[language], to=to).replace(",", "")


_DIGIT_WORDS: Dict[str, List[str]] = {}


def _digit_by_digit(digits: str, language: str) -> str:
    words = _DIGIT_WORDS.get(language)
    if words is None:
        words = _DIGIT_WORDS[language] = [_n2w(d, language) for d in range(10)]
    return " ".join(words[int(d)] for d in digits if d.isdigit())


def _cardinal(digits: str, language: str) -> str:
    """A run of ASCII digits as a cardinal, digit by digit when too long or led by a zero."""
    if len(digits) > MAX_DIGITS or (len(digits) > 1 and digits[0] == "0"):
        return _digit_by_digit(digits, language)
    return _n2w(int(digits), language)


def _ordinal(digits: str, language: str) -> str:
    if len(digits) > MAX_DIGITS:
        return _digit_by_digit(digits, language)
    return _n2w(int(digits), language, "ordinal")


def _year(value: int, language: str) -> str:
    words = _n2w(value, language, "year")
    # num2words says "two thousand and five"; as a year it is "two thousand five".
    return words.replace(" and ", " ") if language == "english" else words


def _number(integer: str, fraction: Optional[str], language: str) -> str:
    """integer (digits, maybe empty) [point fraction digits]."""
    if len(integer) > MAX_DIGITS:
        spoken = _digit_by_digit(integer, language)
    elif integer or not fraction:
        spoken = _cardinal(integer.lstrip("0") or "0", language)
    else:  # ".5"
        spoken = ""
    if fraction:
        spoken += " " + WORDS[language]["point"] + " " + _digit_by_digit(fraction, language)
    return spoken.strip()


def _split_number(written: str, language: str) -> Tuple[str, Optional[str]]:
    """(integer digits, fraction digits or None) of a number as written in `language`."""
    if language == "english":
        integer, _, fraction = written.partition(".")
        return integer.replace(",", ""), fraction or None
    written = re.sub(r"[ \u00a0\u202f]", "", written)
    if "," in written:
        integer, _, fraction = written.partition(",")
        return integer.replace(".", ""), fraction or None
    groups = written.split(".")
    if len(groups) > 1 and all(len(g) == 3 for g in groups[1:]) and len(groups[0]) <= 3:
        return "".join(groups), None
    integer, _, fraction = written.partition(".")
    return integer, fraction or None


def _speak_number(written: str, language: str) -> str:
    integer, fraction = _split_number(written, language)
    if fraction is None and len(integer) > 1 and integer[0] == "0":
        return _digit_by_digit(integer, language)
    return _number(integer, fraction, language)


def _is_one(written: str, language: str) -> bool:
    integer, fraction = _split_number(written, language)
    return integer.lstrip("0") == "1" and fraction is None


# The spaces that group thousands outside English; French also groups with a plain space
# ("3 000 euros").
_GROUP_SPACES = {"other": r"[\u00a0\u202f]", "french": r"[ \u00a0\u202f]"}
_DOTTED = r"\d{1,3}(?:\.\d{3})+(?:,\d+)?"
# A number as written: thousands groups, decimals. Each alternative is unambiguous, so a failed
# match backtracks at most once per character.
_NUMBER = {
    "english": r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)",
    "other": rf"(?:{_DOTTED}|\d{{1,3}}(?:{_GROUP_SPACES['other']}\d{{3}})+(?:,\d+)?|\d+(?:[,.]\d+)?)",
    "french": rf"(?:{_DOTTED}|\d{{1,3}}(?:{_GROUP_SPACES['french']}\d{{3}})+(?!\d)(?:,\d+)?|\d+(?:[,.]\d+)?)",
}
# Where a number may start: not inside a word or another number.
_START = r"(?<!\w)(?<!\d[.,])"
# Where it must end: not followed by a letter or digit, nor by a decimal separator and a digit.
_END = r"(?!\w)(?![.,]\d)"


def _number_pattern(language: str) -> str:
    return _NUMBER.get(language, _NUMBER["other"])


def _number_start(language: str) -> str:
    """Where a number may start in `language`: as _START, and not at a thousands group that follows
    a number's first digits or another group and is followed by one more space ("1 000 000 000").
    A rule that fails on a long run of groups would otherwise start again at each group and read
    the rest of the run from there, a cost quadratic in the run's length. A start at such a group
    reads what the start at the run's first digits read, so it cannot match where that one failed.
    The last group may still start a number: what follows it can make it one that the run is not
    ("000.9" in "5 000.9"). Groups joined by "." or "," are inside a number for _START already."""
    if language == "english":
        return _START
    space = _GROUP_SPACES.get(language, _GROUP_SPACES["other"])
    after_digits = "|".join(f"(?<={_START}{digits}{space})" for digits in (r"\d", r"\d\d", r"\d\d\d"))
    return rf"{_START}(?!(?:{after_digits})\d{{3}}{space})"


# ---------------------------------------------------------------------------------------------
# The rules


def _rules(language: str) -> List[Tuple[Pattern[str], Callable[[re.Match, str], str]]]:
    if language not in LANGUAGE_CODES:
        raise TextError(f"unknown language {language!r}: one of {', '.join(LANGUAGES)}")
    cached = _RULES.get(language)
    if cached is None:
        cached = _RULES[language] = _build_rules(language)
    return cached


_RULES: Dict[str, List[Tuple[Pattern[str], Callable[[re.Match, str], str]]]] = {}


def _build_rules(language: str) -> List[Tuple[Pattern[str], Callable[[re.Match, str], str]]]:
    num = _number_pattern(language)
    start = _number_start(language)
    months = MONTHS[language]
    month_names = "|".join(list(months) + (list(EN_MONTH_ABBREVIATIONS) if language == "english" else []))
    flags = 0 if language in ("english", "german") else re.IGNORECASE
    currency_codes = "|".join(CURRENCIES)
    symbols = re.escape("".join(CURRENCY_SYMBOLS))
    # "1.2.25" is a version in English, a date in the other languages.
    date_separators = "[/-]" if language == "english" else "[/.-]"
    rules: List[Tuple[str, Callable[[re.Match, str], str], int]] = [
        # E-mail addresses and URLs, before anything reads their dots and digits.
        (
            r"(?<![\w.%+-])(?P<local>[A-Za-z0-9][A-Za-z0-9._%+-]*)@(?P<domain>(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,})(?![\w-])",
            _email,
            0,
        ),
        (r"(?<![\w@/.])(?:https?://|www\.)[^\s<>\"']*[^\s<>\"'.,;:!?)\]}]", _url, re.IGNORECASE),
        (
            rf"(?<![\w@/.-])(?:[A-Za-z0-9-]+\.)+(?:{_TLDS})(?![\w-]|\.\w)(?:/[^\s<>\"']*[^\s<>\"'.,;:!?)\]}}])?",
            _url,
            0,
        ),
        # Phone numbers: +CC and groups, or the North American 3-3-4.
        (r"(?<![\w+])\+\d{1,3}(?:[ .-]\(?\d{1,4}\)?){2,6}(?![\w-]|[.,]\d)", _phone, 0),
        (r"(?<![\w+])(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-]|[.,]\d)", _phone, 0),
        # A local number, 3-4 ("555-1234"), unless both are round (a range of amounts: "500-1000").
        (r"(?<![\w+.,-])\d{3}-\d{4}(?![\w-]|[.,]\d)", _local_phone, 0),
        # Dates.
        (r"(?<![\w/.-])(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})(?![\w-]|[./]\d)", _iso_date, 0),
        (
            rf"(?<![\w/.-])(?P<a>\d{{1,2}})(?P<sep>{date_separators})(?P<b>\d{{1,2}})(?P=sep)(?P<y>\d{{4}}|\d{{2}})(?![\w/-]|[.,]\d)",
            _numeric_date,
            0,
        ),
    ]
    if language == "english":
        rules += [
            (
                rf"(?<!\w)(?P<month>{month_names})\.? (?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?!\w)(?![.,:]\d)"
                r"(?:(?P<comma>,? )(?P<y>\d{4})(?!\w|[.,]\d))?",
                _en_month_day,
                0,
            ),
            (
                rf"(?<!\w)(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?: of)? (?P<month>{month_names})(?!\w)"
                r"(?:(?P<comma>,? )(?P<y>\d{4})(?!\w|[.,]\d))?",
                _en_day_month,
                0,
            ),
        ]
    else:
        rules.append(
            (
                rf"(?<!\w)(?P<d>\d{{1,2}})(?P<suffix>er|re|\.|º|ª)?(?P<mid>\s+(?:de\s+)?)(?P<month>{month_names})(?!\w)"
                r"(?:(?P<mid2>\s+(?:de\s+|del\s+)?)(?P<y>\d{4})(?!\w|[.,]\d))?",
                _day_month,
                flags,
            )
        )
    # Times.
    ampm = r"\s?(?P<ampm>[AaPp]\.?[Mm]\.?)(?!\w)"
    rules += [
        (
            r"(?<![\w:.])(?P<h>[01]?\d|2[0-3])(?::|(?<=\d)h(?=\d))(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?"
            + ("(?:" + ampm + "|" + _TIME_END + ")" if language == "english" else _TIME_END),
            _time,
            0,
        ),
    ]
    if language == "english":
        rules.append((r"(?<![\w:.])(?P<h>1[0-2]|0?[1-9])" + ampm, _time, 0))
    # A colon between numbers that is no time of day (a duration "25:30", a score "3:2"): a pause.
    rules.append((r"(?<=\d):(?=\d)", lambda match, language: " ", 0))
    # Currency, percentages, units.
    scale = r"\s?(?P<scale>thousand|million|billion|trillion|[kKmMbB]n?)(?!\w)|" if language == "english" else ""
    rules += [
        (rf"(?<![\w.,])(?P<neg>[-−])?(?P<cur>[{symbols}])\s?(?P<num>{num})(?:{scale}{_END})", _money, 0),
        (rf"(?<!\w)(?P<neg>[-−])?(?P<cur>{currency_codes})\s?(?P<num>{num})(?:{scale}{_END})", _money, 0),
        (
            rf"{start}(?P<neg>(?<![^\s(\[])[-−])?(?P<num>{num}){_END}\s?(?P<cur>[{symbols}]|(?:{currency_codes})(?!\w))",
            _money,
            0,
        ),
        (rf"{start}(?P<neg>(?<![^\s(\[])[-−])?(?P<num>{num})(?:\s?[-–]\s?(?P<num2>{num}))?\s?%", _percent, 0),
    ]
    if language == "english":
        units = "|".join(re.escape(u) for u in sorted(EN_UNITS, key=len, reverse=True))
        rules.append(
            (
                rf"{start}(?P<neg>(?<![^\s(\[])[-−])?(?P<num>{num})(?:[-–](?P<num2>{num}))?\s?(?P<unit>{units})(?![\w/])",
                _unit,
                0,
            )
        )
    # Number signs, ordinals, fractions.
    rules.append((r"(?<![\w#])(?:#|" + NUMBER_SIGNS[language] + r")\s?(?=\d)", _number_sign, 0))
    ordinal_suffix = ORDINAL_SUFFIXES.get(language)
    if ordinal_suffix:
        rules.append((rf"(?<!\w)(?P<num>\d+)(?P<suffix>{ordinal_suffix})(?!\w)", _ordinal_rule, 0))
    else:  # German: "3." is an ordinal after an article or preposition.
        rules.append((r"(?<!\w)(?P<num>\d{1,3})\.(?=\s+\w)", _german_ordinal, 0))
    if language == "english":
        rules.append((r"(?<![\w/.,])(?P<a>\d{1,2})/(?P<b>\d{1,2})(?![\w/]|[.,]\d)", _slash_pair, 0))
    # Plain numbers, ranges and decades.
    if language == "english":
        rules.append((r"(?<![\w.])(?P<parts>\d{1,3}(?:\.\d{1,3}){2,})(?![\w]|\.\d)", _dotted, 0))
    decade = r"(?P<decade>'?s)(?!\w)|" if language == "english" else ""
    rules.append(
        (
            rf"{start}(?P<neg>(?<![^\s(\[])[-−])?(?P<num>{num})(?:(?:-|\s?–\s?)(?P<num2>{num}))?(?:{decade}{_END})",
            _plain,
            0,
        )
    )
    # Words.
    for pattern, spoken, ends in ABBREVIATIONS[language]:
        rules.append((rf"(?<![\w.]){pattern}(?!\w)", _abbreviation(spoken, ends), 0))
    if language == "english":
        rules.append((r"(?<![\w.])St\.(?!\w)", _saint_or_street, 0))
    # Symbols, with the spaces around them (a match starts only where a run of spaces starts).
    rules += [
        (r"(?<!\s)\s*&\s*", _symbol("and"), 0),
        (r"(?<!\s)\s*@\s*", _symbol("at"), 0),
        (r"(?<!\s)\s*\+\s*", _symbol("plus"), 0),
        (r"(?<![\s=<>!])\s*=(?![=>])\s*", _symbol("equals"), 0),
    ]
    return [(re.compile(pattern, flags_), speak) for pattern, speak, flags_ in rules]


# ---------------------------------------------------------------------------------------------
# Speakers: (match, language) -> spoken text


def _spell(part: str, language: str) -> str:
    """A URL or address component: dots, dashes and underscores as words."""
    words = WORDS[language]
    part = part.replace(".", " " + words["dot"] + " ").replace("_", " " + words["underscore"] + " ")
    part = part.replace("-", " " + words["dash"] + " ")
    return re.sub(r"\s+", " ", part).strip()


def _email(match: re.Match, language: str) -> str:
    return (
        _spell(match.group("local"), language)
        + " "
        + WORDS[language]["at"]
        + " "
        + _spell(match.group("domain"), language)
    )


def _url(match: re.Match, language: str) -> str:
    url = re.sub(r"^https?://", "", match.group(0), flags=re.IGNORECASE)
    url = re.split(r"[?#]", url, maxsplit=1)[0].rstrip("/")
    host, _, path = url.partition("/")
    words = [_spell(host.replace("www.", "w w w.", 1) if host.lower().startswith("www.") else host, language)]
    words += [_spell(part, language) for part in path.split("/") if part]
    return (" " + WORDS[language]["slash"] + " ").join(w for w in words if w)


def _phone(match: re.Match, language: str) -> str:
    written = match.group(0)
    groups = re.findall(r"\d+", written)
    spoken = ", ".join(_digit_by_digit(g, language) for g in groups)
    return (WORDS[language]["plus"] + " " + spoken) if written.startswith("+") else spoken


def _local_phone(match: re.Match, language: str) -> str:
    low, high = (int(g) for g in match.group(0).split("-"))
    return match.group(0) if low % 10 == 0 and high % 10 == 0 else _phone(match, language)


def _full_year(written: str) -> int:
    year = int(written)
    if len(written) == 2:
        year += 2000 if year < 50 else 1900
    return year


def _date(day: int, month: int, year: Optional[int], language: str, before: Optional[str]) -> str:
    """A date in words; `before` is the word before it (German declines the day after it)."""
    if not (1 <= month <= 12 and 1 <= day <= 31):
        raise ValueError("not a date")
    name = MONTHS[language][month - 1]
    if language == "english":
        spoken = name + " " + _n2w(day, language, "ordinal")
        return spoken + (", " + _year(year, language) if year is not None else "")
    of = " de " if language in ("spanish", "portuguese") else " "
    spoken = _day(day, language, before) + of + name
    return spoken + (of + _year(year, language) if year is not None else "")


def _day(day: int, language: str, before: Optional[str]) -> str:
    """The day of a month: an ordinal in German (declined after its article or preposition), the
    ordinal "first" in French, Spanish, Italian and Portuguese, a cardinal otherwise."""
    if language == "german":
        return _n2w(day, language, "ordinal") + _german_ending(before)
    if day == 1 and language in ("french", "spanish", "italian", "portuguese"):
        return _n2w(1, language, "ordinal")
    return _n2w(day, language)


def _german_ending(before: Optional[str]) -> str:
    # "am dritten März", "der dritte März", "dritter März" (a date standing alone).
    word = (before or "").lower()
    if word in GERMAN_N:
        return "n"
    if word in GERMAN_E:
        return ""
    return "r"


def _previous_word(match: re.Match) -> Optional[str]:
    start = match.start()
    found = re.search(r"(\w+)\W{0,3}$", match.string[max(0, start - 40) : start])
    return found.group(1) if found else None


def _iso_date(match: re.Match, language: str) -> str:
    year, month, day = int(match.group("y")), int(match.group("m")), int(match.group("d"))
    if not 1100 <= year <= 2099:
        raise ValueError("not a year")
    return _date(day, month, year, language, _previous_word(match))


def _numeric_date(match: re.Match, language: str) -> str:
    a, b = int(match.group("a")), int(match.group("b"))
    month, day = (a, b) if language == "english" else (b, a)
    return _date(day, month, _full_year(match.group("y")), language, _previous_word(match))


def _month_number(name: str, language: str) -> int:
    if name in EN_MONTH_ABBREVIATIONS:
        return EN_MONTH_ABBREVIATIONS[name]
    lowered = [m.lower() for m in MONTHS[language]]
    return lowered.index(name.lower()) + 1


def _en_month_day(match: re.Match, language: str) -> str:
    month = _month_number(match.group("month"), language)
    day = int(match.group("d"))
    if not 1 <= day <= 31:
        raise ValueError("not a day")
    spoken = MONTHS[language][month - 1] + " " + _n2w(day, language, "ordinal")
    if match.group("y"):
        spoken += match.group("comma") + _year(int(match.group("y")), language)
    return spoken


def _en_day_month(match: re.Match, language: str) -> str:
    month = _month_number(match.group("month"), language)
    day = int(match.group("d"))
    if not 1 <= day <= 31:
        raise ValueError("not a day")
    the = "" if (_previous_word(match) or "").lower() == "the" else "the "
    spoken = the + _n2w(day, language, "ordinal") + " of " + MONTHS[language][month - 1]
    if match.group("y"):
        spoken += match.group("comma") + _year(int(match.group("y")), language)
    if the and _starts_sentence(match):
        spoken = "The" + spoken[3:]
    return spoken


def _starts_sentence(match: re.Match) -> bool:
    """Whether the match starts the text or follows the end of a sentence (".", "!" or "?", then
    spaces)."""
    text, before = match.string, match.start()
    if before == 0:
        return True
    # Back over the spaces only: a copy of all the text before every match is quadratic.
    while before > 0 and text[before - 1].isspace():
        before -= 1
    return before > 0 and text[before - 1] in ".!?"


def _day_month(match: re.Match, language: str) -> str:
    day = int(match.group("d"))
    if not 1 <= day <= 31:
        raise ValueError("not a day")
    if language == "german" and match.group("suffix") != ".":
        spoken = _n2w(day, language)
    else:
        spoken = _day(day, language, _previous_word(match))
    spoken += match.group("mid") + match.group("month")
    if match.group("y"):
        spoken += match.group("mid2") + _year(int(match.group("y")), language)
    return spoken


def _time(match: re.Match, language: str) -> str:
    hours = int(match.group("h"))
    minutes = int(match.group("m")) if match.groupdict().get("m") else 0
    seconds = match.groupdict().get("s")
    ampm = match.groupdict().get("ampm")
    if language == "english":
        spoken = _n2w(hours, language)
        if minutes == 0 and not ampm and match.groupdict().get("m"):
            spoken += " o'clock"
        elif minutes and minutes < 10:
            spoken += " oh " + _n2w(minutes, language)
        elif minutes:
            spoken += " " + _n2w(minutes, language)
    else:
        forms = TIME_FORMS[language].split("|")
        form = forms[(0 if minutes else 2) + (1 if hours == 1 else 0)]
        spoken = form.format(h=_feminine_cardinal(_n2w(hours, language), language), m=_n2w(minutes, language))
    if seconds:
        spoken += " " + WORDS[language]["and"] + " " + _n2w(int(seconds), language) + " " + WORDS[language]["seconds"]
    if ampm:
        letters = [c for c in ampm.lower() if c.isalpha()]
        spoken += " " + " ".join(letters)
        if ampm.endswith(".") and _ends_sentence(match):
            spoken += "."
    return spoken


def _ends_sentence(match: re.Match) -> bool:
    """Whether the period that ends this match also ends its sentence (text ends, or a capital
    letter follows)."""
    rest = match.string[match.end() : match.end() + 3]
    return not rest.strip() or (rest[:1].isspace() and rest.lstrip()[:1].isupper())


def _currency_words(code: str, language: str) -> Tuple[str, str]:
    """(singular, plural) of a currency's name."""
    if language == "english":
        names = EN_CURRENCY[code]
        return names[0], names[1]
    if code == "JPY":
        return YEN[language], YEN[language]
    from num2words import CONVERTER_CLASSES

    singular, plural = CONVERTER_CLASSES[LANGUAGE_CODES[language]].CURRENCY_FORMS[code][0][:2]
    return singular, plural


def _money(match: re.Match, language: str) -> str:
    written = match.group("cur")
    code = CURRENCY_SYMBOLS.get(written, written)
    integer, fraction = _split_number(match.group("num"), language)
    scale = match.groupdict().get("scale")
    minus = WORDS[language]["minus"] + " " if match.group("neg") else ""
    singular, plural = _currency_words(code, language)
    if scale:
        exponent = EN_SCALES[scale.lower()]
        scale_word = _n2w(10**exponent, language).split()[-1]
        return minus + _number(integer, fraction, language) + " " + scale_word + " " + plural
    if (
        len(integer) > MAX_DIGITS
        or (fraction is not None and len(fraction) not in (1, 2))
        or code == "JPY"
        and fraction
    ):
        return minus + _number(integer, fraction, language) + " " + plural
    units = int(integer or "0")
    cents = int((fraction or "0").ljust(2, "0"))
    if language == "english":
        names = EN_CURRENCY[code]
        unit_words = _n2w(units, language) + " " + (singular if units == 1 else plural)
        cent_words = _n2w(cents, language) + " " + (names[2] if cents == 1 else names[3])
    else:
        both = num2words(
            units * 100 + cents, lang=LANGUAGE_CODES[language], to="currency", currency=code, separator="|"
        )
        unit_words, _, cent_words = (part.strip().replace(",", "") for part in both.partition("|"))
        if code == "GBP" and language in ("french", "portuguese"):  # "une livre", "duas libras"
            amount, _, name = unit_words.rpartition(" ")
            unit_words = _feminine_cardinal(amount, language) + " " + name
    if cents == 0:
        return minus + unit_words
    if units == 0:
        return minus + cent_words
    return minus + unit_words + " " + WORDS[language]["cents_and"] + " " + cent_words


def _signed(match: re.Match, language: str) -> str:
    minus = WORDS[language]["minus"] + " " if match.groupdict().get("neg") else ""
    return minus + _speak_number(match.group("num"), language)


def _percent(match: re.Match, language: str) -> str:
    spoken = _signed(match, language)
    if match.group("num2"):
        spoken += " " + WORDS[language]["to"] + " " + _speak_number(match.group("num2"), language)
    return spoken + " " + WORDS[language]["percent"]


def _unit(match: re.Match, language: str) -> str:
    singular, plural = EN_UNITS[match.group("unit")]
    spoken = _signed(match, language)
    last = match.group("num")
    if match.group("num2"):
        spoken += " " + WORDS[language]["to"] + " " + _speak_number(match.group("num2"), language)
        last = match.group("num2")
    return spoken + " " + (singular if _is_one(last, language) and not match.group("num2") else plural)


def _number_sign(match: re.Match, language: str) -> str:
    return _capitalized_like(match, WORDS[language]["number"]) + " "


def _capitalized_like(match: re.Match, spoken: str) -> str:
    """A word for an abbreviation, capitalized when the abbreviation was ("No." -> "Number")."""
    return spoken[:1].upper() + spoken[1:] if match.group(0)[:1].isupper() else spoken


def _feminine_cardinal(words: str, language: str) -> str:
    head, _, last = words.rpartition(" ")
    last = FEMININE.get(language, {}).get(last, last)
    return (head + " " + last) if head else last


def _feminine(words: str) -> str:
    return " ".join(w[:-1] + "a" if w.endswith("o") else w for w in words.split())


def _ordinal_rule(match: re.Match, language: str) -> str:
    digits, suffix = match.group("num"), match.group("suffix").lstrip(".")
    spoken = _ordinal(digits, language)
    if language == "french" and suffix in ("re", "ère"):
        spoken = spoken.replace("premier", "première")
    elif language in ("spanish", "italian", "portuguese") and suffix in ("ª", "ra"):
        spoken = _feminine(spoken)
    elif language == "spanish" and spoken.endswith(("primero", "tercero")) and (suffix == "er" or _noun_follows(match)):
        spoken = spoken[:-1]  # "primer lugar", "tercer día"; "primero de mayo"
    return spoken


def _noun_follows(match: re.Match) -> bool:
    following = re.match(r"\s+(\w+)", match.string[match.end() : match.end() + 30])
    return bool(following) and following.group(1).lower() not in ("de", "del", "y", "o", "e")


def _german_ordinal(match: re.Match, language: str) -> str:
    before = _previous_word(match)
    if (before or "").lower() not in GERMAN_N | GERMAN_E | {"ein"}:
        raise ValueError("a number ending a sentence")
    ending = "r" if before.lower() == "ein" else _german_ending(before)
    return _n2w(int(match.group("num")), language, "ordinal") + ending


def _slash_pair(match: re.Match, language: str) -> str:
    """3/4: a date after "on", "by", ... (month/day); a fraction otherwise, when the denominator
    is 2 to 10."""
    a, b = int(match.group("a")), int(match.group("b"))
    if (_previous_word(match) or "").lower() in ON_WORDS and 1 <= a <= 12 and 1 <= b <= 31:
        return MONTHS[language][a - 1] + " " + _n2w(b, language, "ordinal")
    if not 2 <= b <= 10 or a == 0:
        raise ValueError("not a fraction")
    if b == 2:
        denominator = "half" if a == 1 else "halves"
    elif b == 4:
        denominator = "quarter" if a == 1 else "quarters"
    else:
        denominator = _n2w(b, language, "ordinal") + ("" if a == 1 else "s")
    return _n2w(a, language) + " " + denominator


def _dotted(match: re.Match, language: str) -> str:
    """1.2.3 (versions, addresses): each part, joined by "dot"."""
    return (" " + WORDS[language]["dot"] + " ").join(_cardinal(p, language) for p in match.group("parts").split("."))


def _year_value(written: str) -> Optional[int]:
    if len(written) == 4 and written.isdigit() and 1100 <= int(written) <= 2099:
        return int(written)
    return None


def _is_year_context(match: re.Match, language: str) -> bool:
    before = (_previous_word(match) or "").lower()
    if _year_value(before) is not None:  # "in 1999 and 2005"
        return True
    if before in YEAR_WORDS[language] or before in (m.lower() for m in MONTHS[language]):
        return True
    rest = match.string[match.end() : match.end() + 2].lstrip()
    return not rest[:1].isalnum()


def _plain(match: re.Match, language: str) -> str:
    first, second = match.group("num"), match.group("num2")
    decade = match.groupdict().get("decade")
    year, year2 = _year_value(first), _year_value(second or "")
    if decade:
        if year is None and not (len(first) == 2 and first.isdigit() and first.endswith("0")):
            raise ValueError("not a decade")
        if language != "english":
            raise ValueError("decades are English")
        spoken = _year(year, language) if year is not None else _n2w(int(first), language)
        return (spoken[:-1] + "ies") if spoken.endswith("y") else spoken + "s"
    minus = WORDS[language]["minus"] + " " if match.group("neg") else ""
    if second is not None:
        if year is not None and (year2 is not None or len(second) == 2):
            spoken2 = _year(year2, language) if year2 is not None else _speak_number(second, language)
            return _year(year, language) + " " + WORDS[language]["to"] + " " + spoken2
        return (
            minus + _speak_number(first, language) + " " + WORDS[language]["to"] + " " + _speak_number(second, language)
        )
    if year is not None and not minus and _is_year_context(match, language):
        return _year(year, language)
    return minus + _speak_number(first, language)


def _abbreviation(spoken: str, may_end_sentence: bool) -> Callable[[re.Match, str], str]:
    def speak(match: re.Match, language: str) -> str:
        word = _capitalized_like(match, spoken)
        return word + "." if may_end_sentence and _ends_sentence(match) else word

    return speak


def _saint_or_street(match: re.Match, language: str) -> str:
    """ "St." is Street after a name that follows a house number or a lowercase word ("12 Baker
    St.", "221B Baker St.", "on Main St."), Saint otherwise ("St. Louis", "In St. Paul")."""
    before = match.string[max(0, match.start() - 40) : match.start()]
    if re.search(r"(?:\d\w*|\b[a-z]\w*)\s+[A-Z][\w'-]*\s+\Z", before):
        return "Street." if _ends_sentence(match) else "Street"
    return "Saint"


def _symbol(key: str) -> Callable[[re.Match, str], str]:
    def speak(match: re.Match, language: str) -> str:
        # One space on each side that has text ("R&D" -> "R and D").
        left = " " if match.start() > 0 else ""
        right = " " if match.end() < len(match.string) else ""
        return left + WORDS[language][key] + right

    return speak
