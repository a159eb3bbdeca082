"""The audit fails when it cannot audit: .ci/audit.py (CI's audit job) against stand-ins for pip-audit.

pip-audit needs PyPI's JSON API, which the project's machines cannot reach:
there pip-audit 2.10 reports every package as "could not be audited", prints
"No known vulnerabilities found" and exits 0; with ``--strict`` it exits 1 at
the first such package. These tests run .ci/audit.py as CI does, with a
stand-in ``pip_audit`` module first on the path that behaves in each of those
ways (and as a clean and a vulnerable audit), so they prove the script's
verdicts with no network and no pip-audit installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sitekit.pages import ROOT

AUDIT = ROOT / ".ci" / "audit.py"
REQUIREMENTS = ROOT / "requirements.txt"

# A stand-in for `python -m pip_audit`: it records its arguments, reads the pins
# of its --requirement files and writes the JSON report pip-audit 2.10 writes
# (--format json --output FILE), as the MODE in $STAND_IN_MODE says.
STAND_IN = textwrap.dedent('''
    import json, os, re, sys

    args = sys.argv[1:]
    with open(os.environ["STAND_IN_ARGS"], "w") as log:
        json.dump(args, log)
    pins = []
    for i, arg in enumerate(args):
        if arg == "--requirement":
            for line in open(args[i + 1]):
                match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^ \\\\;]+)", line)
                if match:
                    pins.append((match.group(1).lower(), match.group(2)))
    mode = os.environ["STAND_IN_MODE"]

    def skipped(name, version):
        return {"name": name, "skip_reason": f"Dependency not found on PyPI and could not be audited: {name} ({version})"}

    def audited(name, version, vulns=()):
        return {"name": name, "version": version, "vulns": list(vulns)}

    status = 0
    if mode == "offline":        # what pip-audit 2.10.1 does where PyPI's JSON API answers 404
        dependencies = [skipped(*pin) for pin in pins]
        print("No known vulnerabilities found")
    elif mode == "offline-strict":   # the same with --strict: exit 1, no report
        name, version = pins[0]
        print(f"ERROR:pip_audit._cli:{name}: Dependency not found on PyPI and could not be audited: {name} ({version})",
              file=sys.stderr)
        sys.exit(1)
    elif mode == "one-skipped":
        dependencies = [skipped(*pins[0])] + [audited(*pin) for pin in pins[1:]]
        print("No known vulnerabilities found")
    elif mode == "clean":
        dependencies = [audited(*pin) for pin in pins]
        print("No known vulnerabilities found")
    elif mode == "vulnerable":
        vuln = {"id": "PYSEC-0000-1", "fix_versions": ["99.0"], "aliases": [], "description": ""}
        dependencies = [audited(*pins[0], [vuln])] + [audited(*pin) for pin in pins[1:]]
        print("Found 1 known vulnerability in 1 package", file=sys.stderr)
        status = 1
    output = args[args.index("--output") + 1]
    with open(output, "w") as report:
        json.dump({"dependencies": dependencies, "fixes": []}, report)
    sys.exit(status)
''')


# What CI installs, and so what the audit covers unless told otherwise: the site's pins, the engines',
# PyTorch's and CI's tools'.
CI_FILES = [REQUIREMENTS, *sorted((ROOT / ".ci").glob("requirements-*.txt"))]


def pin_count(paths=CI_FILES) -> int:
    """How many packages the files pin (a package pinned in two files counts once)."""
    return len({re.sub(r"[-_.]+", "-", line.split("==")[0]).lower() for path in paths
                for line in path.read_text(encoding="utf-8").splitlines() if "==" in line and not line.startswith(" ")})


@pytest.fixture
def run_audit(tmp_path):
    """Run .ci/audit.py with the stand-in as pip_audit: ``(exit status, output, pip-audit's arguments or None)``."""
    package = tmp_path / "stand-in" / "pip_audit"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(STAND_IN)
    arguments = tmp_path / "arguments.json"

    def run(mode: str, *args: str):
        env = {**os.environ, "STAND_IN_MODE": mode, "STAND_IN_ARGS": str(arguments),
               "PYTHONPATH": os.pathsep.join([str(package.parent), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, str(AUDIT), *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        called = json.loads(arguments.read_text()) if arguments.exists() else None
        return done.returncode, done.stdout + done.stderr, called

    return run


def test_pip_audit_runs_strict_over_every_hash_pinned_file_ci_installs(run_audit):
    _, output, arguments = run_audit("clean")
    assert "--strict" in arguments
    assert {"--require-hashes", "--disable-pip"} <= set(arguments)
    assert arguments[arguments.index("--format") + 1] == "json"
    files = [Path(arguments[i + 1]).name for i, arg in enumerate(arguments) if arg == "--requirement"]
    assert files == [path.name for path in CI_FILES]
    assert {"requirements-torch.txt", "requirements-zensical.txt", "requirements-properdocs.txt",
            "requirements-ci-tools.txt"} <= set(files)


def test_pytorchs_cpu_build_is_audited_as_its_public_release(run_audit):
    """PyPI has no torch 2.13.0+cpu: the audit asks about 2.13.0, the release the CPU build is made from."""
    status, output, arguments = run_audit("clean")
    assert status == 0, output
    torch_file = next(Path(arguments[i + 1]) for i, arg in enumerate(arguments)
                      if arg == "--requirement" and arguments[i + 1].endswith("requirements-torch.txt"))
    assert torch_file != ROOT / ".ci" / "requirements-torch.txt", "pip-audit read the +cpu pin itself"
    assert "torch==2.13.0+cpu is audited as its public release, torch==2.13.0" in output


def test_an_audit_of_no_package_fails_although_pip_audit_exits_0(run_audit):
    """pip-audit without the network: every package skipped, "No known vulnerabilities found", exit 0."""
    status, output, _ = run_audit("offline")
    assert status == 1
    assert f"audited 0 of {pin_count()} packages" in output
    assert "Dependency not found on PyPI and could not be audited" in output


def test_strict_pip_audit_failing_on_a_package_it_cannot_audit_fails_the_audit(run_audit):
    status, output, _ = run_audit("offline-strict")
    assert status == 1
    assert "could not be audited" in output


def test_one_package_not_audited_fails_the_audit(run_audit):
    status, output, _ = run_audit("one-skipped")
    assert status == 1
    assert f"audited {pin_count() - 1} of {pin_count()} packages" in output


def test_a_known_vulnerability_fails_the_audit_and_is_named(run_audit):
    status, output, _ = run_audit("vulnerable")
    assert status == 1
    assert "PYSEC-0000-1" in output
    assert "fixed in 99.0" in output


def test_every_package_audited_and_none_vulnerable_passes(run_audit):
    status, output, _ = run_audit("clean")
    assert status == 0, output
    assert f"audited {pin_count()} of {pin_count()} packages pinned in requirements.txt, .ci/" in output


def test_a_file_with_no_pins_fails(run_audit, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing pinned\n")
    status, output, arguments = run_audit("clean", "-r", str(empty))
    assert status == 1
    assert "nothing to audit is a failure" in output
    assert arguments is None  # pip-audit never ran


def test_every_file_given_is_audited(run_audit):
    engines = ROOT / ".ci" / "requirements-properdocs.txt"
    status, output, arguments = run_audit("offline", "-r", str(REQUIREMENTS), "-r", str(engines))
    assert status == 1
    files = [arguments[i + 1] for i, arg in enumerate(arguments) if arg == "--requirement"]
    assert files == [str(REQUIREMENTS), str(engines)]
    pins = {line.split("==")[0] for path in (REQUIREMENTS, engines)
            for line in path.read_text().splitlines() if "==" in line and not line.startswith(" ")}
    assert f"audited 0 of {len(pins)} packages" in output
