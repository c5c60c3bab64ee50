"""What every settings section shares: the base model that refuses unknown keys, and reading a secret.

Owns the section base only. It must not import a section, the root ``Settings`` or the loading machinery
(they all import it). Smaller than the house 50-line floor on purpose: every section module imports it, and
folding it into one of them would make the others depend on that section.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SecretStr


class Section(BaseModel):
    """A settings section: an unknown key is a problem (a typo would leave the default in force), and defaults
    are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def secret_value(secret: SecretStr | None) -> str | None:
    """The plain text of a secret setting (``None`` when unset); call it only where the value is used."""
    return None if secret is None else secret.get_secret_value()
