"""ncu's own guided-analysis results (the rules under Nsight Compute's ``sections/*.py``), flattened.

Each result: section, rule, title, kind (ok/optimization/warning/error), message with ncu's ``@...@``
link markup reduced to its text, the estimated speedup in % and whether it is local (that part of
the kernel) or global (whole-kernel duration), and the focus metrics the rule looked at.
Reports collected with ``--set triage`` (explicit ``--metrics``) run no rules, so the list is empty.
"""

from __future__ import annotations

import re

# ncu_report.MsgType and SpeedupType values (stable across ncu_report releases we read)
_KIND = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
_SPEEDUP = {0: "unknown", 1: "local", 2: "global"}
# @section:Id:Text@, @url:Text:link@, @sass:addr:Text@, @source:file:line:Text@ -> Text
_LINK = re.compile(r"@(section|url|sass|source):([^@]*)@")


def _link_text(match: re.Match) -> str:
    kind, body = match.group(1), match.group(2)
    parts = body.split(":")
    if kind == "url":
        return parts[0]
    return parts[-1] if parts else body


def clean_message(text: str) -> str:
    return " ".join(_LINK.sub(_link_text, text or "").split())


def rule_results(action) -> list[dict]:
    """Flattened ``action.rule_results_as_dicts()``, largest estimated speedup first."""
    try:
        raw = action.rule_results_as_dicts()
    except Exception:  # older ncu_report without rule support: no rules rather than a crash
        return []
    out = []
    for r in raw:
        msg = r.get("rule_message") or {}
        est = r.get("speedup_estimation") or {}
        out.append(
            {
                "section": r.get("section_identifier", ""),
                "rule": r.get("rule_identifier", ""),
                "name": r.get("name", ""),
                "title": msg.get("title", ""),
                "kind": _KIND.get(int(msg.get("type", 0) or 0), str(msg.get("type"))),
                "message": clean_message(msg.get("message", "")),
                "speedup_pct": float(est["speedup"]) if "speedup" in est else None,
                "speedup_type": _SPEEDUP.get(int(est.get("type", 0) or 0), "unknown") if est else None,
                "focus_metrics": [{"name": f.get("name"), "value": f.get("value")} for f in r.get("focus_metrics", [])],
            }
        )
    out.sort(key=lambda d: -(d["speedup_pct"] or -1.0))
    return out
