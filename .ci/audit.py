#!/usr/bin/env python3
"""Known vulnerabilities in the pinned packages: pip-audit, failing unless it audited every one.

    python .ci/audit.py                      # every pin CI installs: requirements.txt and .ci/requirements-*.txt
    python .ci/audit.py -r FILE [-r FILE]    # only these hash-pinned files
    python .ci/audit.py -- --cache-dir DIR   # after --, options for pip-audit itself

Run it where pip-audit is installed (``pip install pip-audit``; CI's audit
job) and PyPI's JSON API (https://pypi.org/pypi/NAME/VERSION/json) is
reachable. pip-audit asks that API for each pin's known vulnerabilities. Where
it answers 404 (a mirror that serves only the package index, as on the
project's machines) pip-audit 2.10 marks every package "could not be
audited", prints "No known vulnerabilities found" and exits 0: an audit of
none of the packages that reads as a pass. So this script fails in that case,
twice over:

1. pip-audit runs with ``--strict``, which exits 1 on the first package it
   could not audit;
2. the script reads pip-audit's JSON report and requires every package the
   files pin to be in it with a version (audited), not with a skip reason; it
   prints "audited N of M packages" and fails unless N equals M and M > 0.

Any known vulnerability fails it too (pip-audit's exit 1), and is listed.

A pin with a local version label, PyTorch's CPU build ``torch==2.13.0+cpu``,
is audited as its public release (``torch==2.13.0``): PyPI knows no
``+cpu`` version, and its vulnerability data is about the release the build
was made from. The script says which pins it audited so.
Without the network it fails: that is the point, not a fault to work around.
tests/test_audit.py shows each failure with a stand-in for pip-audit.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
LOCAL_LABEL = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*==[^\s;\\+]+)\+[^\s;\\]+", re.MULTILINE)
# What CI installs: the site's pins, and the engines', PyTorch's and CI's tools' (.ci/run, ci.yml).
CI_FILES = [ROOT / "requirements.txt", *sorted((ROOT / ".ci").glob("requirements-*.txt"))]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(files: list[Path]) -> dict[str, str]:
    """Every ``name==version`` line of the files, by canonical name."""
    pins = {}
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            match = PIN.match(line)
            if match:
                pins[canonical(match.group(1))] = match.group(2)
    return pins


def as_released(files: list[Path], folder: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """The files as pip-audit reads them: a copy in ``folder`` where a pin has a local label, without it."""
    read, renamed = [], []
    for path in files:
        text = path.read_text(encoding="utf-8")
        if not LOCAL_LABEL.search(text):
            read.append(path)
            continue
        renamed += [(match.group(0), match.group(1)) for match in LOCAL_LABEL.finditer(text)]
        copy = folder / path.name
        copy.write_text(LOCAL_LABEL.sub(r"\1", text), encoding="utf-8")
        read.append(copy)
    return read, renamed


def pip_audit_command(files: list[Path], report: Path, extra: list[str]) -> list[str]:
    command = [sys.executable, "-m", "pip_audit", "--strict", "--require-hashes", "--disable-pip",
               "--progress-spinner", "off", "--format", "json", "--output", str(report)]
    for path in files:
        command += ["--requirement", str(path)]
    return command + extra


def vulnerabilities(report: dict) -> list[str]:
    lines = []
    for dependency in report.get("dependencies", []):
        for vuln in dependency.get("vulns", []):
            fixed = ", ".join(vuln.get("fix_versions", [])) or "no fixed version"
            lines.append(f"  {dependency['name']} {dependency.get('version', '?')}: {vuln.get('id', '?')} (fixed in {fixed})")
    return lines


def audit(files: list[Path], extra: list[str]) -> int:
    pins = pinned(files)
    names = ", ".join(str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
                      for path in files)
    if not pins:
        print(f"audit: no name==version pins in {names}: nothing to audit is a failure", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        report_path = Path(folder) / "pip-audit.json"
        read, renamed = as_released(files, Path(folder))
        for pin, release in renamed:
            print(f"audit: {pin} is audited as its public release, {release}")
        status = subprocess.run(pip_audit_command(read, report_path, extra), check=False).returncode
        report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else {}
    found = vulnerabilities(report)
    if found:
        print("audit: known vulnerabilities:\n" + "\n".join(found), file=sys.stderr)
    if status != 0:
        print(f"audit: pip-audit exited {status} (a known vulnerability, or with --strict a package it could not audit:"
              " see above); a failure", file=sys.stderr)
        return status
    dependencies = {canonical(entry["name"]): entry for entry in report.get("dependencies", [])}
    audited = {name for name, entry in dependencies.items() if "version" in entry and "skip_reason" not in entry}
    missing = sorted(set(pins) - audited)
    print(f"audit: pip-audit audited {len(pins) - len(missing)} of {len(pins)} packages pinned in {names}")
    if missing:
        reasons = [f"  {name}: {dependencies.get(name, {}).get('skip_reason', 'not in the report')}" for name in missing]
        print("audit: not audited, so the audit proves nothing about them: a failure\n" + "\n".join(reasons[:10])
              + (f"\n  ... and {len(reasons) - 10} more" if len(reasons) > 10 else ""), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-r", "--requirement", action="append", type=Path, dest="files",
                        help="a hash-pinned requirements file (default: requirements.txt and every "
                             ".ci/requirements-*.txt, all CI installs); repeatable")
    parser.add_argument("extra", nargs="*", help="after --: options passed on to pip-audit")
    args = parser.parse_args(argv)
    return audit(args.files or CI_FILES, args.extra)


if __name__ == "__main__":
    sys.exit(main())
