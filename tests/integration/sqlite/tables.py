"""The email_jobs table of the matrix, for the SQLite-only tests beside it."""

from __future__ import annotations

from typing import Any

from trinbox import Inbox

from ..matrix.schema import EMAIL_JOBS as EMAIL_JOBS_BY_STAND
from ..matrix.schema import LeasedEmail, LockedEmail

EMAIL_JOBS = EMAIL_JOBS_BY_STAND["sqlite"]
EMAIL_FORMS: list[type[Inbox[Any, Any]]] = [LeasedEmail, LockedEmail]

__all__ = ["EMAIL_FORMS", "EMAIL_JOBS", "LeasedEmail", "LockedEmail"]
