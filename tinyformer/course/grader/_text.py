"""What the student wrote, made safe to show: every message built from a submission's output,
errors or replies passes through `clean` before it reaches a terminal or results.json.

An escape sequence in an exception message can move the cursor, clear the screen and draw a
fake table in the TA's terminal; a carriage return or backspace can hide the real line. `clean`
keeps printable text, newlines and tabs, and nothing else.
"""

from __future__ import annotations

import re

__all__ = ["clean"]

# ANSI sequences first (CSI "ESC [ ... final", OSC "ESC ] ... BEL/ST", and two-character
# escapes), so that their parameters go with them; then any other control character (C0, DEL,
# C1), the Unicode line and paragraph separators and bidirectional overrides, which can
# reorder what a terminal shows.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, ended by BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b.?"  # any other escape
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(text: str, limit: int = 4000) -> str:
    """`text` without escape sequences or control characters (newlines and tabs stay), cut to
    at most `limit` characters with a note saying how much went.

    Args:
        text: anything; a non-string is converted with `str` first.
        limit: the most characters returned (at least 40).
    """
    if not isinstance(text, str):
        text = str(text)
    limit = max(40, limit)
    text = text.replace("\r\n", "\n")
    if len(text) > 16 * limit:  # bound the regex work on a flood; the tail would be cut anyway
        text = text[: 16 * limit]
    text = _CONTROL.sub("", _ANSI.sub("", text))
    if len(text) <= limit:
        return text
    note = f"\n... (cut: {len(text)} characters in all)"
    return text[: limit - len(note)] + note
