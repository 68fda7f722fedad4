"""BCP 14 levels of the rules the checks test (the registry and the context both use them)."""

from __future__ import annotations

import enum

__all__ = ["Level"]


class Level(enum.Enum):
    """BCP 14 level of the rule a check tests."""

    #: A violation fails the run.
    MUST = "MUST"
    #: A violation is a warning (a failure with ``--strict``).
    SHOULD = "SHOULD"
    #: Informative; a violation is a warning, also with ``--strict``.
    MAY = "MAY"
