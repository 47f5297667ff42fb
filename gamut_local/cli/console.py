"""The command line's two consoles: results on stdout; progress, warnings and errors on stderr."""

from __future__ import annotations

from gamut_local.reporting.progress import plain_console

err = plain_console(stderr=True, soft_wrap=True)
out = plain_console(soft_wrap=True)
