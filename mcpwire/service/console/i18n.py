"""The console's languages: English and Simplified Chinese, from a gettext message catalogue.

Theory of operation: every string the console shows is English in the source (templates mark
theirs with ``{% trans %}`` and ``_()``, Python code with :func:`N_` or a view's ``gettext``) and
looked up at render time in the catalogue of the chosen language: ``locale/<lang>/LC_MESSAGES/
console.po``, compiled to ``console.mo`` (both kept in the package; ``pybabel`` extracts, updates
and compiles them, see ``babel.cfg`` and the README). English needs no catalogue: it is the
source text.

The language is the one the browser's cookie names (set by the switch in the page header, so a
choice is remembered), else the first of ``Accept-Language`` the console speaks, else English.
Chinese of any region gets Simplified Chinese, the only Chinese the console has.

Text that does not come from the console (names, descriptions and results from servers, what a
model wrote, the config loader's and the API's own messages, which keep one wording everywhere)
is shown as it is, marked ``translate="no"`` or ``lang="en"`` in the page.
"""

from __future__ import annotations

import functools
import gettext as _gettext
from pathlib import Path
from typing import Final

from babel.support import NullTranslations, Translations

__all__ = [
    "DEFAULT",
    "LANGUAGES",
    "LANG_COOKIE",
    "LOCALE_DIR",
    "N_",
    "STATUS_TITLES",
    "english",
    "negotiate",
    "translations",
]

LOCALE_DIR: Final = Path(__file__).with_name("locale")
DOMAIN: Final = "console"
#: the cookie that remembers the language chosen with the switch
LANG_COOKIE: Final = "mcpwire_lang"
#: the language of the source text
DEFAULT: Final = "en"
#: the console's languages: their BCP 47 tag, and their name in themselves
LANGUAGES: Final = {"en": "English", "zh-Hans": "简体中文"}
#: BCP 47 tag -> the catalogue's folder under ``locale/``
_FOLDERS: Final = {"zh-Hans": "zh_Hans"}


def N_(message: str) -> str:
    """Marks ``message`` for the catalogue without translating it here (it is looked up where it
    is shown)."""
    return message


def english(message: str) -> str:
    """A ``gettext`` that keeps the source text (for code called outside a page)."""
    return message


#: the titles of the problems the console shows, by status (Python's own phrases are not in the
#: catalogue, so they are spelt out here)
STATUS_TITLES: Final = {
    400: N_("Bad Request"),
    401: N_("Unauthorized"),
    403: N_("Forbidden"),
    404: N_("Not Found"),
    405: N_("Method Not Allowed"),
    409: N_("Conflict"),
    413: N_("Content Too Large"),
    415: N_("Unsupported Media Type"),
    422: N_("Unprocessable Content"),
    429: N_("Too Many Requests"),
    500: N_("Internal Server Error"),
    502: N_("Bad Gateway"),
    503: N_("Service Unavailable"),
    504: N_("Gateway Timeout"),
}


@functools.cache
def translations(lang: str) -> _gettext.NullTranslations:
    """The catalogue of ``lang`` (one of :data:`LANGUAGES`; English and unknown tags: none)."""
    folder = _FOLDERS.get(lang)
    if folder is None:
        return NullTranslations()
    found = Translations.load(str(LOCALE_DIR), [folder], DOMAIN)
    if not isinstance(found, Translations):  # pragma: no cover - the catalogue ships with the package
        raise FileNotFoundError(f"the console's {lang} catalogue is missing from {LOCALE_DIR}")
    return found


def _quality(part: str) -> float:
    for param in part.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def negotiate(accept_language: str | None, cookie: str | None = None) -> str:
    """The language to speak: the cookie's when it names one of :data:`LANGUAGES`, else the
    browser's most wanted one the console has (any ``zh`` is Simplified Chinese), else English."""
    if cookie in LANGUAGES:
        return cookie
    wanted: list[tuple[float, int, str]] = []
    for index, part in enumerate((accept_language or "")[:1000].split(",")[:50]):
        tag = part.split(";")[0].strip().lower()
        if tag:
            wanted.append((-_quality(part), index, tag))
    for negative_q, _, tag in sorted(wanted):
        if negative_q >= 0:
            break
        primary = tag.split("-")[0]
        if primary == "zh":
            return "zh-Hans"
        if primary == "en":
            return "en"
    return DEFAULT
