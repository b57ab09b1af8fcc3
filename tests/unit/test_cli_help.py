"""Every command has --help text with an example, every option is explained, and the README
documents every command (docs checked by tests, so they cannot drift)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from iogauge.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


# Typer vendors its own click (typer._click), so commands are inspected by duck typing.
# Every command and every group at any depth (`lab device create`, `guarantee release`):
# groups are listed too, since `iogauge guarantee` itself runs the controller.
def _commands() -> dict[str, Any]:
    group = typer.main.get_command(app)
    assert hasattr(group, "commands")
    out: dict[str, Any] = {}

    def walk(prefix: str, cmd: Any) -> None:
        out[prefix] = cmd
        for sub, subcmd in getattr(cmd, "commands", {}).items():
            walk(f"{prefix} {sub}", subcmd)

    for name, cmd in group.commands.items():
        walk(name, cmd)
    return out


COMMANDS = sorted(_commands())


def test_the_foundation_commands_exist() -> None:
    assert {"iostat", "record", "export", "diagnose"} <= set(COMMANDS)


def test_top_level_help_lists_every_command() -> None:
    res = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    for name in COMMANDS:
        assert name.split()[0] in res.output


@pytest.mark.parametrize("name", COMMANDS)
def test_command_help(name: str) -> None:
    res = CliRunner().invoke(app, [*name.split(), "--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    cmd = _commands()[name]
    assert cmd.help and len(cmd.help.strip()) > 40, f"{name}: help text too thin"
    assert "Example" in cmd.help, f"{name}: help has no example"
    for param in cmd.params:
        if param.param_type_name == "option" and not param.hidden:
            assert param.help, f"{name}: option {param.opts} has no help text"


@pytest.mark.parametrize("name", COMMANDS)
def test_readme_documents_command_with_example(name: str) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(rf"^#+ .*`iogauge {re.escape(name)}", readme, re.M), (
        f"README has no section for `iogauge {name}`")
    assert re.search(rf"^\s*(sudo )?(\.venv/bin/)?iogauge {re.escape(name)}\b", readme, re.M), (
        f"README has no example command line for `iogauge {name}`")


def test_readme_gives_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make run" in readme
    assert "make test" in readme


def test_ci_calls_make_test() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, re.M)
