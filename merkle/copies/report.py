"""The copy check's report: counts of every verdict, the first rows of each, what the check
cost (data bytes read, requests per object), as a JSON-ready dict and as text."""

from __future__ import annotations

import json
from typing import Any, Dict, List

from merkle.copies.verdicts import EXTRA, FINDINGS, MATCH, VERDICTS

__all__ = ["format_text", "to_json"]


def to_json(report: Dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"


def _row_line(r: Dict[str, Any]) -> str:
    name = r.get("name") or r.get("ozone_name") or "?"
    bits = [repr(name)[1:-1]]  # a name is data: control characters shown escaped
    if r.get("algorithm"):
        bits.append(_values(r))
    if r.get("detail"):
        bits.append(str(r["detail"]))
    if r.get("ozone_note"):
        bits.append(str(r["ozone_note"]))
    sources = r.get("sources") or []
    if sources:  # which replica spoke for each block (names are data: escaped)
        shown = ", ".join(repr(str(x))[1:-1] for x in sources[:2])
        more = f" and {len(sources) - 2} more blocks" if len(sources) > 2 else ""
        bits.append(f"from {shown}{more}")
    return "    " + ": ".join(bits[:1]) + ("  " + "; ".join(bits[1:]) if bits[1:] else "")


def _values(r: Dict[str, Any]) -> str:
    """Both values named by their algorithm: `crc32c 0x... vs 0x...` (Ozone's, then the
    copy's). A row's values are those of the first algorithm it lists (verdicts.decide); the
    other algorithms compared are named after them, never beside a value not theirs."""
    algs = str(r["algorithm"])
    first, rest = (algs, []) if "composite" in algs else (algs.split(",")[0], algs.split(",")[1:])
    text = f"{first} {r.get('source_value')} vs {r.get('target_value')}"
    if rest:
        how = "differ" if r.get("verdict") == "MISMATCH" else "equal"
        text += f" ({', '.join(rest)} {how} too)"
    return text


def _result(report: Dict[str, Any]) -> str:
    """The last line: "every key is proved" only when at least one key was compared and
    every key MATCHed; otherwise how many keys were proved, of how many."""
    c = report["counts"]
    keys = sum(n for v, n in c.items() if v != EXTRA)
    proved = c.get(MATCH, 0)
    if report["findings"] == 0 and proved > 0 and proved == keys:
        return f"every key is proved identical to its copy ({proved} keys)"
    tally = (
        f"{proved} of {keys} keys proved identical to their copies"
        if proved
        else f"no key was proved identical to its copy ({keys} compared)"
    )
    if report["findings"] == 0:
        return f"no findings outside --allow {','.join(report.get('allowed') or [])}; {tally}"
    return f"{report['findings']} findings; {tally}"


def format_text(report: Dict[str, Any]) -> str:
    """The report for a terminal: a line per count, then the first rows of each finding."""
    out: List[str] = []
    c = report["counts"]
    out.append(
        f"copy check: {report['keys']} keys in the OM DB checkpoint against "
        f"{report['objects']} objects in {report['target']}"
    )
    out.append("  " + "  ".join(f"{v} {c.get(v, 0)}" for v in VERDICTS))
    cost = report["cost"]
    reads = (
        f"{cost['bytes_read']} data bytes read (a local directory: only the copies "
        "whose key has their name and size are read)"
        if report["reads_data"]
        else "0 data bytes read"
    )
    out.append(
        f"  {reads}; requests: {cost['list_requests']} listing, "
        f"{cost['object_requests']} for objects (at most {cost['max_requests_per_object']} "
        f"per object, {cost['requests_per_object']:.2f} on average)"
    )
    if report.get("om_problem_count"):
        out.append(
            f"  {report['om_problem_count']} OM DB rows could not be read as keys "
            f"(left out): first: {report['om_problems'][:1]}"
        )
    if report.get("out_of_scope_keys"):
        out.append(
            f"  {report['out_of_scope_keys']} keys under no --map source prefix (not compared)"
        )
    if report.get("out_of_scope_objects"):
        out.append(
            f"  {report['out_of_scope_objects']} target objects outside every --map "
            "target prefix (not compared)"
        )
    for v in list(FINDINGS) + [MATCH]:
        rows = report["first"].get(v) or []
        if not rows or (v == MATCH and c.get(v, 0) == 0):
            continue
        more = c.get(v, 0) - len(rows)
        out.append(f"{v} ({c.get(v, 0)}{', first ' + str(len(rows)) if more > 0 else ''}):")
        out.extend(_row_line(r) for r in rows)
    out.append(f"result: {_result(report)}")
    return "\n".join(out) + "\n"
