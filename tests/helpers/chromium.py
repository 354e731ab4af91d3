"""The machine's Chromium (Debian package, installed by ``scripts/setup.sh --test``) that Playwright drives.

Tests launch it by path; the suite never runs ``playwright install``.
"""

CHROMIUM = "/usr/bin/chromium"
