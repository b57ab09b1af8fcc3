"""The TOML form, the command-line form, and their precedence; and the docs' example config
parses (so docs/guarantee.md cannot drift from the code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.config import ProtectSpec, build_config, load_toml, parse_protect
from iogauge.guarantee.policy import AdaptiveParams, PaperParams
from iogauge.guarantee.safety import DEFAULT_STATE_PATH

DOCS = Path(__file__).resolve().parents[3] / "docs" / "guarantee.md"

FULL = """
device = "/dev/sdb"
interval_s = 20
policy = "paper"
state = "/run/iogauge/backup.state.json"
db = "/var/lib/iogauge/guarantee.duckdb"
b_min_iops = 5
capacity_model = "util"
on_infeasible = "refuse"

[[protect]]
cgroup = "/sys/fs/cgroup/fileserver.slice"
iops = 100

[[protect]]
cgroup = "/sys/fs/cgroup/db.slice"
iops = 50.5

[[throttle]]
cgroup = "/sys/fs/cgroup/backup.slice"

[paper]
x_initial_pct = 90.0
y = 0.4

[adaptive]
x_max_pct = 85.0
"""


def test_full_toml(tmp_path: Path) -> None:
    p = tmp_path / "g.toml"
    p.write_text(FULL)
    cfg = build_config(load_toml(p), {})
    assert cfg.device == "/dev/sdb" and cfg.interval_s == 20.0 and cfg.policy == "paper"
    assert cfg.protect == (ProtectSpec(Path("/sys/fs/cgroup/fileserver.slice"), 100.0),
                           ProtectSpec(Path("/sys/fs/cgroup/db.slice"), 50.5))
    assert cfg.throttle == (Path("/sys/fs/cgroup/backup.slice"),)
    assert cfg.state == Path("/run/iogauge/backup.state.json")
    assert cfg.b_min_iops == 5 and cfg.capacity_model == "util"
    assert cfg.on_infeasible == "refuse"
    assert cfg.paper == PaperParams(x_initial_pct=90.0, y=0.4)
    assert cfg.adaptive == AdaptiveParams(x_max_pct=85.0)


def test_command_line_wins_over_the_file(tmp_path: Path) -> None:
    p = tmp_path / "g.toml"
    p.write_text(FULL)
    cfg = build_config(load_toml(p), {"interval_s": 1.0, "policy": "adaptive",
                                      "protect": None, "throttle": (), "device": "sdc"})
    assert (cfg.device, cfg.interval_s, cfg.policy) == ("sdc", 1.0, "adaptive")
    assert len(cfg.protect) == 2  # not given on the command line: the file's


def test_defaults(tmp_path: Path) -> None:
    cfg = build_config(None, {"device": "sda", "protect": (parse_protect("/cg/a:10"),),
                              "throttle": (Path("/cg/b"),)})
    assert cfg.policy == "adaptive" and cfg.interval_s == 1.0 and cfg.dry_run is False
    assert cfg.state == DEFAULT_STATE_PATH and cfg.db is None and cfg.b_min_iops == 1


@pytest.mark.parametrize(("text", "message"), [
    ('devise = "sda"\n', "unknown key.*devise.*known: .*device"),
    ('interval_s = "1"\n', "interval_s must be a float"),
    ('b_min_iops = 1.5\n', "b_min_iops must be a int"),
    ('[[protect]]\ncgroup = "/a"\n', r"\[\[protect\]\] #1 needs exactly cgroup"),
    ('throttle = [1]\n', "throttle #1 must be a path"),
    ('[paper]\nz = 1\n', r"\[paper\]: unknown key.*z; known"),
    ('[adaptive]\nx_max_pct = 150\n', r"\[adaptive\]: need 0 < x_min_pct"),
    ("device = \n", "not valid TOML"),
])
def test_bad_toml_is_named(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "g.toml"
    p.write_text(text)
    with pytest.raises(GuaranteeError, match=message):
        load_toml(p)


@pytest.mark.parametrize(("over", "message"), [
    ({"device": ""}, "no device"),
    ({"protect": ()}, "no protected cgroup"),
    ({"throttle": ()}, "no throttled cgroup"),
    ({"interval_s": 0.01}, "interval must be >= 0.1"),
    ({"policy": "magic"}, "unknown policy 'magic'"),
    ({"throttle": (Path("rel/b"),)}, "must be an absolute path"),
    ({"throttle": (Path("/cg/a"),)}, "is given twice"),
    ({"b_min_iops": 0}, "b_min_iops must be >= 1"),
    ({"capacity_model": "guess"}, "capacity_model must be"),
])
def test_bad_settings_are_named(over: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"device": "sda", "protect": (parse_protect("/cg/a:10"),),
                               "throttle": (Path("/cg/b"),)}
    base.update(over)
    with pytest.raises(GuaranteeError, match=message):
        build_config(None, base)


def test_parse_protect() -> None:
    assert parse_protect("/sys/fs/cgroup/a.slice:100") == ProtectSpec(
        Path("/sys/fs/cgroup/a.slice"), 100.0)
    assert parse_protect("/weird:dir/x:7.5").cgroup == Path("/weird:dir/x")
    for bad, msg in (("/cg/a", "expected CGROUP_DIR:IOPS"), ("/cg/a:many", "not a number"),
                     ("/cg/a:-3", "positive"), (":5", "expected CGROUP_DIR:IOPS")):
        with pytest.raises(GuaranteeError, match=msg):
            parse_protect(bad)


def test_the_documented_config_parses(tmp_path: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert blocks, "docs/guarantee.md has no ```toml block"
    for block in blocks:
        p = tmp_path / "doc.toml"
        p.write_text(block)
        cfg = build_config(load_toml(p), {})
        assert cfg.protect and cfg.throttle
