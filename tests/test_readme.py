"""The README's commands are the ones CI runs, as written, and the site CI builds with them is the one published.

.ci/run reads the README's set-up, serve, build and test blocks
(.ci/readme_commands.py) and runs them in a fresh clone. These tests fail
when the README and CI could drift apart: a command block CI would not run,
a role .ci/run no longer asks for, an address `mkdocs serve` does not
answer at, or a deploy of anything but what the README's build wrote.
"""

from __future__ import annotations

import importlib.util
import re
from urllib.parse import urlsplit

import pytest
import yaml

from sitekit.pages import ROOT

README = ROOT / "README.md"
RUN = ROOT / ".ci" / "run"
CI = ROOT / ".github" / "workflows" / "ci.yml"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


readme = _load("readme_commands")


def test_every_command_block_of_the_readme_is_one_ci_runs():
    commands = readme.check(README.read_text(encoding="utf-8"))
    assert commands["serve"] == "mkdocs serve"
    assert commands["build"] == "mkdocs build --strict"
    assert commands["test"] == "pytest"
    assert "pip install -r requirements.txt" in commands["set-up"]


def test_ci_runs_each_role_in_order():
    """.ci/run asks for every role, and runs them in the order readme_commands.ROLES gives."""
    run = RUN.read_text(encoding="utf-8")
    variables = {role: re.search(rf"^(\w+)=\$\(readme {role}\)$", run, re.MULTILINE) for role in readme.ROLES}
    missing = [role for role, found in variables.items() if found is None]
    assert not missing, f".ci/run does not read the README's {', '.join(missing)} command"
    ran = {role: run.find(f'"${found.group(1)}"', found.end()) for role, found in variables.items()}
    assert all(place > 0 for place in ran.values()), ran
    assert sorted(ran, key=ran.get) == list(readme.ROLES)


@pytest.mark.parametrize(("change", "named"), [
    ("```bash\nmkdocs serve\n```", "has no <!-- newcomer: ROLE --> line"),
    ("<!-- newcomer: lint -->\n```bash\nruff check .\n```", "a role .ci/run does not run"),
    ("<!-- newcomer: test -->\n```bash\npytest -x\n```", "a second 'test' block"),
])
def test_a_readme_command_ci_would_not_run_fails_naming_it(change, named):
    text = README.read_text(encoding="utf-8") + "\n" + change + "\n"
    with pytest.raises(readme.ReadmeError, match=re.escape(named)) as raised:
        readme.check(text)
    assert change.splitlines()[-2] in str(raised.value)


def test_a_readme_without_a_role_fails():
    text = README.read_text(encoding="utf-8").replace("<!-- newcomer: build -->\n", "")
    with pytest.raises(readme.ReadmeError, match="has no <!-- newcomer"):
        readme.check(text)


def test_the_readme_gives_the_address_mkdocs_serve_answers_at(mkdocs_config):
    """mkdocs serve's default address, under the path of site_url (where it serves the site)."""
    address = readme.address(README.read_text(encoding="utf-8"))
    assert address == "http://127.0.0.1:8000" + urlsplit(mkdocs_config["site_url"]).path


def test_what_is_published_is_what_the_readmes_build_wrote_once_every_job_passed(mkdocs_config):
    workflow = yaml.safe_load(CI.read_text(encoding="utf-8"))
    clone = re.search(r'git clone .* "\$newcomer/clone"', RUN.read_text(encoding="utf-8"))
    assert clone and "newcomer=$PWD/artifacts/newcomer" in RUN.read_text(encoding="utf-8")
    build = readme.check(README.read_text(encoding="utf-8"))["build"]
    assert " -d " not in f" {build} ", "the README's build writes mkdocs.yml's site_dir"
    site = f"artifacts/newcomer/clone/{ROOT.joinpath(mkdocs_config['site_dir']).relative_to(ROOT)}"
    uploads = [step for step in workflow["jobs"]["test"]["steps"]
               if str(step.get("uses", "")).startswith("actions/upload-pages-artifact")]
    assert [step["with"]["path"] for step in uploads] == [site]
    deploy = workflow["jobs"]["deploy"]
    assert set(deploy["needs"]) == set(workflow["jobs"]) - {"deploy"}
    assert not (ROOT / ".github" / "workflows" / "publish.yml").exists(), "a second way to publish"
