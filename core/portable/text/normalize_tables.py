"""The language data of text normalization (core/portable/text/normalize.py), per language: the words
spoken around numbers, month names, the words before a year, currency and unit names, abbreviations
with their spoken forms, the signs written for "number" and after an ordinal, the forms of a time of
day, and the words that decline or select a reading.

Apart from the rules so that a language's words can be read, corrected or added without reading
the regular expressions and functions that use them; normalize.py holds those and imports these
tables. The number words themselves all come from num2words, never from here. Data only: no code.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

# The languages normalization reads (language_of finds one in a model's name).
LANGUAGES = ("english", "french", "german", "spanish", "italian", "portuguese", "dutch")

# Each language's ISO 639-1 code: num2words' name for it, and Home Assistant's (server/wyoming_voices.py).
LANGUAGE_CODES = {
    "english": "en",
    "french": "fr",
    "german": "de",
    "spanish": "es",
    "italian": "it",
    "portuguese": "pt",
    "dutch": "nl",
}

# The words around numbers (not number words: those all come from num2words), per language.
WORDS: Dict[str, Dict[str, str]] = {
    "english": {
        "point": "point",
        "minus": "minus",
        "to": "to",
        "percent": "percent",
        "plus": "plus",
        "equals": "equals",
        "and": "and",
        "at": "at",
        "number": "number",
        "dot": "dot",
        "slash": "slash",
        "dash": "dash",
        "underscore": "underscore",
        "cents_and": "and",
        "seconds": "seconds",
    },
    "french": {
        "point": "virgule",
        "minus": "moins",
        "to": "à",
        "percent": "pour cent",
        "plus": "plus",
        "equals": "égal",
        "and": "et",
        "at": "arobase",
        "number": "numéro",
        "dot": "point",
        "slash": "slash",
        "dash": "tiret",
        "underscore": "tiret bas",
        "cents_and": "et",
        "seconds": "secondes",
    },
    "german": {
        "point": "Komma",
        "minus": "minus",
        "to": "bis",
        "percent": "Prozent",
        "plus": "plus",
        "equals": "gleich",
        "and": "und",
        "at": "at",
        "number": "Nummer",
        "dot": "Punkt",
        "slash": "Schrägstrich",
        "dash": "Bindestrich",
        "underscore": "Unterstrich",
        "cents_and": "und",
        "seconds": "Sekunden",
    },
    "spanish": {
        "point": "coma",
        "minus": "menos",
        "to": "a",
        "percent": "por ciento",
        "plus": "más",
        "equals": "igual a",
        "and": "y",
        "at": "arroba",
        "number": "número",
        "dot": "punto",
        "slash": "barra",
        "dash": "guion",
        "underscore": "guion bajo",
        "cents_and": "con",
        "seconds": "segundos",
    },
    "italian": {
        "point": "virgola",
        "minus": "meno",
        "to": "a",
        "percent": "per cento",
        "plus": "più",
        "equals": "uguale a",
        "and": "e",
        "at": "chiocciola",
        "number": "numero",
        "dot": "punto",
        "slash": "barra",
        "dash": "trattino",
        "underscore": "trattino basso",
        "cents_and": "e",
        "seconds": "secondi",
    },
    "portuguese": {
        "point": "vírgula",
        "minus": "menos",
        "to": "a",
        "percent": "por cento",
        "plus": "mais",
        "equals": "igual a",
        "and": "e",
        "at": "arroba",
        "number": "número",
        "dot": "ponto",
        "slash": "barra",
        "dash": "hífen",
        "underscore": "sublinhado",
        "cents_and": "e",
        "seconds": "segundos",
    },
    "dutch": {
        "point": "komma",
        "minus": "min",
        "to": "tot",
        "percent": "procent",
        "plus": "plus",
        "equals": "is gelijk aan",
        "and": "en",
        "at": "apenstaartje",
        "number": "nummer",
        "dot": "punt",
        "slash": "slash",
        "dash": "streepje",
        "underscore": "underscore",
        "cents_and": "en",
        "seconds": "seconden",
    },
}

# Month names as a date is spoken; English also reads its abbreviations ("Jan 5", "Sept. 3").
MONTHS: Dict[str, List[str]] = {
    "english": ("January February March April May June July August September October November December").split(),
    "french": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split(),
    "german": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split(),
    "spanish": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split(),
    "italian": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre".split(),
    "portuguese": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split(),
    "dutch": "januari februari maart april mei juni juli augustus september oktober november december".split(),
}
EN_MONTH_ABBREVIATIONS = {
    "Jan": 1,
    "Feb": 2,
    "Mar": 3,
    "Apr": 4,
    "Jun": 6,
    "Jul": 7,
    "Aug": 8,
    "Sep": 9,
    "Sept": 9,
    "Oct": 10,
    "Nov": 11,
    "Dec": 12,
}

# A four-digit number after one of these words is a year.
YEAR_WORDS: Dict[str, Tuple[str, ...]] = {
    "english": tuple(
        "in since from until till to by of year circa before after during around early late mid "
        "between through spring summer autumn fall winter".split()
    ),
    "french": tuple("en depuis de année jusqu'en vers avant après dès".split()),
    "german": tuple("im in seit von bis ab jahr jahre jahres um vor nach anno".split()),
    "spanish": tuple("en de desde hasta año antes después hacia".split()),
    "italian": tuple("nel dal al del anno fino prima dopo".split()),
    "portuguese": tuple("em de desde até ano antes depois".split()),
    "dutch": tuple("in sinds van tot jaar voor na rond".split()),
}

# Currency: symbol -> ISO code; English names (num2words' English forms say "five euro");
# other languages take their names from num2words where it has them.
CURRENCY_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
CURRENCIES = ("USD", "EUR", "GBP", "JPY")
EN_CURRENCY: Dict[str, Tuple[str, str, str, str]] = {
    "USD": ("dollar", "dollars", "cent", "cents"),
    "EUR": ("euro", "euros", "cent", "cents"),
    "GBP": ("pound", "pounds", "penny", "pence"),
    "JPY": ("yen", "yen", "", ""),
}
# num2words has no yen outside English.
YEN = {"french": "yens", "german": "Yen", "spanish": "yenes", "italian": "yen", "portuguese": "ienes", "dutch": "yen"}
EN_SCALES = {"k": 3, "thousand": 3, "m": 6, "mn": 6, "million": 6, "b": 9, "bn": 9, "billion": 9, "trillion": 12}

EN_UNITS: Dict[str, Tuple[str, str]] = {
    "mm": ("millimeter", "millimeters"),
    "cm": ("centimeter", "centimeters"),
    "m": ("meter", "meters"),
    "km": ("kilometer", "kilometers"),
    "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"),
    "kg": ("kilogram", "kilograms"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "l": ("liter", "liters"),
    "ft": ("foot", "feet"),
    "mi": ("mile", "miles"),
    "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
    "ms": ("millisecond", "milliseconds"),
    "sec": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "mAh": ("milliamp hour", "milliamp hours"),
}

# Abbreviations: (pattern, spoken, may end a sentence). A sentence-ending one keeps its period
# when the text ends or a capital letter follows, so chunking still sees the sentence end.
ABBREVIATIONS: Dict[str, List[Tuple[str, str, bool]]] = {
    "english": [
        (r"Mrs\.|Mrs(?=\s+[A-Z])", "Missus", False),
        (r"Mr\.|Mr(?=\s+[A-Z])", "Mister", False),
        (r"Ms\.|Ms(?=\s+[A-Z])", "Miz", False),
        (r"Dr\.|Dr(?=\s+[A-Z])", "Doctor", False),
        (r"Prof\.", "Professor", False),
        (r"Jr\.", "Junior", True),
        (r"Sr\.", "Senior", True),
        (r"Mt\.", "Mount", False),
        (r"vs\.?", "versus", False),
        (r"etc\.", "et cetera", True),
        (r"e\.g\.", "for example", False),
        (r"i\.e\.", "that is", False),
        (r"approx\.", "approximately", False),
    ],
    "french": [
        (r"M\.(?=\s+[A-Z])", "Monsieur", False),
        (r"Mme", "Madame", False),
        (r"Mlle", "Mademoiselle", False),
        (r"Dr\.?(?=\s+[A-Z])", "Docteur", False),
        (r"etc\.", "et cetera", True),
    ],
    "german": [
        (r"Dr\.", "Doktor", False),
        (r"Prof\.", "Professor", False),
        (r"[zZ]\.\s?B\.", "zum Beispiel", False),
        (r"usw\.", "und so weiter", True),
        (r"bzw\.", "beziehungsweise", False),
        (r"ca\.", "circa", False),
    ],
    "spanish": [
        (r"Sra\.", "señora", False),
        (r"Sr\.", "señor", False),
        (r"Dra\.", "doctora", False),
        (r"Dr\.", "doctor", False),
        (r"etc\.", "etcétera", True),
    ],
    "italian": [
        (r"Sig\.ra", "signora", False),
        (r"Sig\.", "signor", False),
        (r"Dott\.", "dottor", False),
        (r"ecc\.", "eccetera", True),
    ],
    "portuguese": [
        (r"Sra\.", "senhora", False),
        (r"Sr\.", "senhor", False),
        (r"Dr\.", "doutor", False),
        (r"etc\.", "etcétera", True),
    ],
    "dutch": [
        (r"[dD]hr\.", "de heer", False),
        (r"[mM]evr\.", "mevrouw", False),
        (r"[bB]ijv\.", "bijvoorbeeld", False),
        (r"[eE]nz\.", "enzovoort", True),
    ],
}

# Written before a number for "number": "#5", "No. 5".
NUMBER_SIGNS = {
    "english": r"No\.",
    "french": r"[nN]°|[nN]o\.",
    "german": r"Nr\.",
    "spanish": r"[nN]\.?º|[nN]úm\.",
    "italian": r"[nN]\.?º|[nN]um\.",
    "portuguese": r"[nN]\.?º",
    "dutch": r"[nN]r\.",
}

# The words before a German ordinal (a day, "3.") that decline it: "am dritten" after GERMAN_N,
# "der dritte" after GERMAN_E, "dritter" after any other (normalize._german_ending).
GERMAN_N = {
    "am",
    "im",
    "zum",
    "vom",
    "beim",
    "den",
    "dem",
    "des",
    "zur",
    "einem",
    "einen",
    "einer",
    "seit",
    "ab",
    "bis",
}
GERMAN_E = {"der", "die", "das", "eine"}

TIME_FORMS = {
    # The forms of a time, "|"-separated: with minutes (several hours), with minutes (one o'clock), on
    # the hour (several), on the hour (one); {h} the hours, {m} the minutes, as words.
    "french": "{h} heures {m}|{h} heure {m}|{h} heures|{h} heure",
    "german": "{h} Uhr {m}|ein Uhr {m}|{h} Uhr|ein Uhr",
    "spanish": "{h} y {m}|{h} y {m}|{h} en punto|{h} en punto",
    "italian": "{h} e {m}|{h} e {m}|{h} in punto|{h} in punto",
    "portuguese": "{h} horas e {m}|{h} hora e {m}|{h} horas|{h} hora",
    "dutch": "{h} uur {m}|{h} uur {m}|{h} uur|{h} uur",
}

# The feminine of a cardinal's last word (hours, "livre", "libra" are feminine); num2words gives the
# masculine.
FEMININE = {
    "french": {"un": "une"},
    "spanish": {"uno": "una", "veintiuno": "veintiuna"},
    "italian": {"uno": "una"},
    "portuguese": {"um": "uma", "dois": "duas"},
}

# English words after which "3/4" is a date (month/day), not a fraction.
ON_WORDS = {"on", "by", "until", "till", "from", "since", "before", "after", "due"}

# What follows the digits of an ordinal ("1st", "1er", "2º", "3de"); German has none: its ordinals
# end in "." and are told from a sentence end by the word before them (normalize._german_ordinal).
ORDINAL_SUFFIXES = {
    "english": r"(?:st|nd|rd|th|ST|ND|RD|TH)",
    "french": r"(?:er|re|ère|e|ème|eme|ᵉ|ᵉʳ)",
    "spanish": r"(?:\.?º|\.?ª|er|ra|ro|do|to)",
    "italian": r"(?:\.?º|\.?ª)",
    "portuguese": r"(?:\.?º|\.?ª)",
    "dutch": r"(?:ste|de|e)",
}
