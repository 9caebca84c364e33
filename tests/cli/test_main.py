"""``vdla``'s one error path (`vdla.cli.main.main`): a domain error or a file the user
named is one line (exit 1), bad usage exit 2, anything else a bug: exit 70 and the
traceback in a file under the cache folder, never in the folder the command ran in."""

import importlib
import pkgutil

import pytest

from vdla.cli import config as config_command
from vdla.errors import VdlaError
from vdla.hw.config import ConfigError
from tests.fuzz_helpers import vdla as run_vdla
from tests.test_packaging import PYPROJECT


@pytest.fixture
def crash_folder(tmp_path, monkeypatch):
    """The cache folder of the run, and the cwd an empty folder beside it."""
    monkeypatch.setenv("VDLA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VDLA_DEBUG", raising=False)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path / "cache" / "crash"


def _raising(error):
    def describe(config):
        raise error
    return describe


@pytest.mark.parametrize("error", [KeyError("block_in"), ValueError("math domain error"),
                                   TypeError("'NoneType' object is not iterable")])
def test_a_bug_exits_70_and_writes_its_traceback_to_a_file(monkeypatch, capsys, crash_folder,
                                                           error):
    monkeypatch.setattr(config_command, "describe_config", _raising(error))
    code, _, err = run_vdla(monkeypatch, capsys, "config", "list")
    assert code == 70
    (crash,) = crash_folder.iterdir()
    name = type(error).__name__
    assert err.splitlines() == [f"vdla: internal error (a bug in vdla, please report it): "
                                f"{name}: {error}; traceback written to {crash}"]
    text = crash.read_text()
    assert "argv: ['vdla', 'config', 'list']" in text
    assert "Traceback (most recent call last)" in text and "in describe" in text
    assert text.rstrip().endswith(f"{name}: {error}")
    assert not list((crash_folder.parent.parent / "cwd").iterdir())


@pytest.mark.parametrize("error, line", [
    (ConfigError("config x.json: block_in: expected a power of two"),
     "Error: config x.json: block_in: expected a power of two"),
    (VdlaError("verilator failed to build the model (log: /tmp/build.log)\nmake: *** [all]"),
     "Error: verilator failed to build the model (log: /tmp/build.log)"),
    (FileNotFoundError(2, "No such file or directory", "/x/in.npy"),
     "Error: /x/in.npy: No such file or directory"),
])
def test_a_user_error_is_one_line_with_exit_status_1(monkeypatch, capsys, crash_folder, error,
                                                     line):
    monkeypatch.setattr(config_command, "describe_config", _raising(error))
    code, _, err = run_vdla(monkeypatch, capsys, "config", "list")
    assert (code, err.splitlines()) == (1, [line])
    assert not crash_folder.exists()


def test_bad_usage_exits_2(monkeypatch, capsys, crash_folder):
    code, _, err = run_vdla(monkeypatch, capsys, "config", "show", "--no-such-flag")
    assert code == 2 and err.splitlines()[-1].startswith("Error: No such option")


def test_vdla_debug_raises_the_bug_instead(monkeypatch, capsys, crash_folder):
    monkeypatch.setenv("VDLA_DEBUG", "1")
    monkeypatch.setattr(config_command, "describe_config", _raising(KeyError("block_in")))
    with pytest.raises(KeyError, match="block_in"):
        run_vdla(monkeypatch, capsys, "config", "list")


def _vdla_modules():
    """Every module of the packages ``pyproject.toml`` declares (but the cocotb benches,
    which run when imported, inside a simulator)."""
    for package in PYPROJECT["tool"]["setuptools"]["packages"]:
        if "cocotb" in package:
            continue
        yield importlib.import_module(package)
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if not module.ispkg and module.name != "__main__":
                yield importlib.import_module(f"{package}.{module.name}")


def test_every_exception_vdla_defines_is_a_vdla_error():
    """One error hierarchy: the CLI reports a `VdlaError` in one line and calls anything
    else a bug, so an error class outside it would be reported as a bug."""
    defined = {value for module in _vdla_modules() for value in vars(module).values()
               if isinstance(value, type) and issubclass(value, BaseException)
               and value.__module__.startswith("vdla.")}
    assert len(defined) > 30
    assert [cls.__qualname__ for cls in defined if not issubclass(cls, VdlaError)] == []


def test_every_command_reports_domain_errors_itself():
    """Each command is a `Command` (a plain ``@click.command`` would let a `VdlaError`
    through to `main` when invoked alone, as the tests' CliRunner does)."""
    import click
    from vdla.cli.main import cli
    from vdla.cli.options import Command

    def plain(command, path):
        found = [] if isinstance(command, Command) else [path]
        for name, sub in getattr(command, "commands", {}).items():
            found += plain(sub, f"{path} {name}")
        return found
    assert isinstance(cli, click.Group) and len(cli.commands) > 10
    assert plain(cli, "vdla") == []


def test_every_command_summary_is_a_whole_sentence_in_80_columns():
    """``vdla --help`` (and each group's) lists every command on one line, its summary whole."""
    import re

    import click
    from click.testing import CliRunner

    from vdla.cli.main import cli
    groups = [[], *([name] for name, command in cli.commands.items() if isinstance(command, click.Group))]
    for group in groups:
        result = CliRunner().invoke(cli, [*group, "--help"], terminal_width=80)
        assert result.exit_code == 0, result.output
        listed = result.output.split("Commands:\n")[1].splitlines()
        names = (cli if not group else cli.commands[group[0]]).commands
        assert len(listed) == len(names), listed   # a summary that wraps takes two lines
        for line in listed:
            assert re.fullmatch(r"  [a-z0-9-]+ +[A-Z][^\n]*[^.]\.", line), (group, line)
