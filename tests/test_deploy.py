"""Issue 34: the systemd units and the alert rules under deploy/ are what they claim:
`systemd-analyze verify` accepts the units (with ExecStart pointed at this install's
`crcmerkle`, the units' own path being the operator's), each unit runs `crcmerkle scan` with
options the scan accepts, and every metric the alert rules name is one the scan writes
(`promtool check rules` too where the machine has it)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from checkout import checkout_text  # noqa: E402

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
UNITS = ("crcmerkle-scan.service", "crcmerkle-scan-once.service", "crcmerkle-scan.timer")
INSTALLED = "/usr/local/bin/crcmerkle"


def _needed(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is missing on a CI machine (Debian: systemd)")
        pytest.skip(f"{tool} is not installed")
    return found


def _exec_start(unit: str) -> List[str]:
    """The unit's ExecStart as argv (continuation lines joined, variables left as $NAME)."""
    text = checkout_text(f"deploy/{unit}").replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    return shlex.split(line[len("ExecStart=") :])


def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    tool = _needed("systemd-analyze")
    here = Path(sys.executable).parent / "crcmerkle"
    if not here.exists():
        pytest.skip("no crcmerkle console script beside this Python")
    for name in UNITS:
        text = checkout_text(f"deploy/{name}")
        (tmp_path / name).write_text(text.replace(INSTALLED, str(here)))
    p = subprocess.run(
        [tool, "verify", *(str(tmp_path / n) for n in UNITS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    # nothing said about our units (systemd may talk about the host's own units)
    said = [line for line in (p.stdout + p.stderr).splitlines() if "crcmerkle" in line]
    assert said == [], said


@pytest.mark.parametrize("unit", UNITS[:2])
def test_each_unit_runs_a_scan_the_parser_accepts(unit: str, tmp_path: Path) -> None:
    from merkle.cli import build_parser

    argv = _exec_start(unit)
    assert argv[0] == INSTALLED and argv[1] == "scan"
    words = [w for w in argv[2:] if not w.startswith("$")]
    words += [str(tmp_path / "vol")]  # $CRCMERKLE_VOLUMES
    args = build_parser().parse_args(["scan", *words])
    assert args.state == "/var/lib/crcmerkle/scan" and args.max_age == 7 * 86400
    assert args.no_write and args.metrics_file.endswith(".prom")
    assert args.loop == (unit == "crcmerkle-scan.service")
    text = checkout_text(f"deploy/{unit}")
    # the state lies in the unit's StateDirectory, private, and the rest is read-only
    assert "StateDirectory=crcmerkle" in text and "StateDirectoryMode=0700" in text
    assert "ProtectSystem=strict" in text and "NoNewPrivileges=yes" in text
    assert "IPAddressDeny=any" in text


def _scan_metric_names(tmp_path: Path) -> set:
    pytest.importorskip("prometheus_client")
    from merkle.cli.metrics import scan_registry
    from merkle.replica.incremental import StateTracker
    from merkle.replica.scan import scan_paths
    from merkle.replica.scanstate import ScanState

    from replica_helpers import make_cluster

    root = tmp_path / "c"
    make_cluster(root, "bitflip=1", containers=1, seed=1)
    tracker = StateTracker(ScanState(str(tmp_path / "s"), [str(root)]), 3600.0)
    results = scan_paths([root], write_tree=False, tracker=tracker)
    names = set()
    for family in scan_registry(results, [], tracker).collect():
        names.add(family.name)
        names.update(s.name for s in family.samples)
    return names


def test_the_alert_rules_name_only_metrics_the_scan_writes(tmp_path: Path) -> None:
    rules: Dict[str, Any] = yaml.safe_load(checkout_text("deploy/crcmerkle-alerts.yml"))
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    assert {a["alert"] for a in alerts} >= {"CrcmerkleReplicaError", "CrcmerkleVerificationOverdue"}
    written = _scan_metric_names(tmp_path)
    for a in alerts:
        named = set(re.findall(r"\bcrcmerkle_[a-z_]+", a["expr"]))
        assert named and named <= written, (a["alert"], named - written)
    overdue = next(a for a in alerts if a["alert"] == "CrcmerkleVerificationOverdue")
    assert "2 * crcmerkle_scan_max_age_seconds" in overdue["expr"]
    error = next(a for a in alerts if a["alert"] == "CrcmerkleReplicaError")
    assert 'level="error"' in error["expr"]


def test_promtool_checks_the_rules() -> None:
    checkout_text("deploy/crcmerkle-alerts.yml")
    tool = shutil.which("promtool")
    if tool is None:
        pytest.skip("promtool is not installed (Debian: prometheus)")
    p = subprocess.run(
        [tool, "check", "rules", str(DEPLOY / "crcmerkle-alerts.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr
