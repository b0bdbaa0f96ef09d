"""The last bad inputs (issue 32, item 3): each a clear error naming the file, the field or flag
and the fix, exit 2, nothing written, no traceback."""

from __future__ import annotations

from tests.conftest import cli, write_config

SIM = """
name = "b"
jobs = ["paired"]
samples = 1
{extra}
[[models]]
provider = "simulated"
name = "sim"
temperature = 1.0
"""


def _said(done) -> str:
    assert "Traceback" not in done.stdout + done.stderr
    return " ".join(done.stderr.split())


def test_an_output_dir_that_cannot_be_made_names_the_field(tmp_path):
    config = write_config(tmp_path, SIM.format(extra='output_dir = "/proc/no-such-place"'))
    done = cli("run", str(config), cwd=tmp_path)
    said = _said(done)
    assert done.returncode == 2
    assert "output_dir" in said and "cannot create the run folder" in said and "fix:" in said


def test_an_output_dir_that_is_a_file_names_the_field(tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder\n")
    config = write_config(tmp_path, SIM.format(extra=f'output_dir = "{tmp_path / "taken"}"'))
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 2 and "output_dir" in _said(done)
    assert (tmp_path / "taken").read_text() == "a file, not a folder\n"


def test_too_many_samples_on_the_command_line_blame_the_flag(tmp_path):
    config = write_config(tmp_path, SIM.format(extra=f'output_dir = "{tmp_path / "runs"}"'))
    done = cli("run", str(config), "--samples", "99999999999999999999", cwd=tmp_path)
    said = _said(done)
    assert done.returncode == 2 and "'--samples'" in said and "field 'samples'" not in said
    assert not (tmp_path / "runs").exists()


def test_a_missing_prices_file_names_the_config_and_field(tmp_path):
    config = write_config(tmp_path, SIM.format(extra='prices = "nope.toml"'))
    done = cli("plan", str(config), cwd=tmp_path)
    said = _said(done)
    assert done.returncode == 2
    assert str(config) in said and "field 'prices'" in said and "config's folder" in said
