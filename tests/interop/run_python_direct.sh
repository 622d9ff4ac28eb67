#!/usr/bin/env bash
# Python SDK client <-> Python SDK servers with no gateway in between: proves the
# peers work and pins the wire facts in NOTES-python.md. Creates the venvs first
# (a no-op when they are up to date). Last line: `python-direct: N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/setup.sh" >&2
exec python3 "$here/python/direct_check.py" "$@"
