"""Writes a generated block between two HTML-comment markers of BENCHMARKS.md
(appended at the end when the markers are missing). Shared by the report scripts."""

import os
import re


def write_between(path, begin, end, lines):
    text = open(path).read() if os.path.exists(path) else f"# Benchmarks\n\n{begin}\n{end}\n"
    if begin not in text:
        text = text.rstrip("\n") + f"\n\n{begin}\n{end}\n"
    text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: "\n".join(lines), text, flags=re.S)
    with open(path, "w") as f:
        f.write(text)
