"""Post `gpuenv regressions --alert DIR`'s alarms as GitHub issues, one per alarm, skipping a title
already filed (open or closed): the nightly benchmark workflow's last step.

    python tools/post_alarms.py DIR [--label benchmark-alert]

It calls `gh` (GH_TOKEN in the environment); the tests put a stand-in `gh` first on PATH.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path


def filed(title: str) -> bool:
    query = f'"{title}" in:title'
    out = subprocess.run(["gh", "issue", "list", "--state", "all", "--search", query, "--json", "title"],
                         capture_output=True, text=True, check=True).stdout
    return any(i.get("title") == title for i in json.loads(out or "[]"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--label", default="benchmark-alert")
    a = p.parse_args(argv)
    alarms = json.loads((a.dir / "alarms.json").read_text())
    if alarms:  # the label must exist before an issue can carry it (--force: create or leave as is)
        subprocess.run(["gh", "label", "create", a.label, "--force", "--description", "gpuenv's nightly benchmark alerts"],
                       capture_output=True, text=True, check=False)
    posted = 0
    for alarm in alarms:
        if filed(alarm["title"]):
            print(f"already filed: {alarm['title']}")
            continue
        subprocess.run(["gh", "issue", "create", "--title", alarm["title"], "--body", alarm["body"], "--label", a.label], check=True)
        posted += 1
    print(f"{posted} issue(s) filed, {len(alarms) - posted} already there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
