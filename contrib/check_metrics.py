#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks contrib/'s alerting rules and Grafana dashboard against docs/api.md.

  check_metrics.py metrics API_MD RULES_YML DASHBOARD_JSON
      Every metric family used by a rule's expr, a dashboard target's expr or
      a dashboard variable's query (label_values, query_result) is listed in the "## Metrics" table of API_MD (histogram series
      NAME_bucket, NAME_sum and NAME_count count as NAME; `up` is
      Prometheus's own). The dashboard is valid JSON, and every panel has a
      unique id, a gridPos and (rows aside) at least one target with an expr.

  check_metrics.py promql PROMTOOL DASHBOARD_JSON
      Every dashboard expr parses as PromQL: they are written, with Grafana's
      interval variables replaced by 5m, as recording rules to a temporary
      file that `PROMTOOL check rules` reads.

Exit status 0 when all is well, 1 with every problem named otherwise, 2 on
wrong usage. Python's standard library only (the rules file is read with a
small extractor of its `expr:` values, checked against its count of rules).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

# PromQL words that are not metric names when not followed by "(".
KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
    "group_right", "bool", "offset", "atan2", "inf", "nan", "start", "end",
}
# Series Prometheus makes itself: not xlbd's to document.
NOT_XLBD = {"up"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def documented_families(api_md):
    """{name: type} from the rows of the "## Metrics" table of api_md."""
    families = {}
    in_metrics = False
    with open(api_md, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                in_metrics = line.strip() == "## Metrics"
                continue
            if not in_metrics or not line.startswith("| `"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            kind = cells[1] if len(cells) > 1 else ""
            for name in re.findall(r"`([^`]+)`", cells[0]):
                families[name.split("{", 1)[0].strip()] = kind
    return families


def metric_names(expr):
    """The metric names an expression selects (a PromQL tokenizer, not a parser)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"#[^\n]*", " ", s)  # comments
    s = re.sub(r"\{[^{}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\[\]]*\]", " ", s)  # ranges and subqueries
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", s)
    s = re.sub(r"\$\{[^}]*\}|\$\w+", " ", s)  # Grafana variables
    s = re.sub(r"\boffset\s+-?\w+", " ", s)
    s = re.sub(r"(?<![\w:.])(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?![\w:])", " ", s)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        name = m.group(0)
        if re.match(r"\s*\(", s[m.end():]):  # function or aggregation
            continue
        if name.lower() in KEYWORDS:
            continue
        names.add(name)
    return names


def rule_exprs(rules_yml):
    """[(rule name, expr)] of a rules file: the values of its `expr:` keys,
    plain, quoted or block scalars. Fails when their count differs from the
    count of `- alert:` and `- record:` entries (a form it does not read)."""
    with open(rules_yml, encoding="utf-8") as f:
        lines = f.read().split("\n")
    rules = []
    exprs = []
    name = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\s*-\s+(alert|record):\s*(\S.*)$", line)
        if m:
            name = m.group(2).strip().strip("'\"")
            rules.append(name)
        m = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*)$", line)
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        value = m.group(2).rstrip()
        body = []
        j = i + 1
        while j < len(lines) and (lines[j].strip() == "" or
                                  len(lines[j]) - len(lines[j].lstrip()) > indent):
            body.append(lines[j].strip())
            j += 1
        if re.match(r"^[|>][+-]?\d*\s*(#.*)?$", value):
            text = "\n".join(body)
        elif value and value[0] in "\"'":
            if len(value) < 2 or value[-1] != value[0] or body and any(body):
                raise ValueError(f"{rules_yml}: rule {name}: a quoted expr must be on one line")
            text = value[1:-1]
            if value[0] == '"':
                text = text.encode().decode("unicode_escape")
            else:
                text = text.replace("''", "'")
        else:
            text = "\n".join([value] + body)
        exprs.append((name, text.strip()))
        i = j
    if len(exprs) != len(rules):
        raise ValueError(f"{rules_yml}: {len(rules)} rules but {len(exprs)} expr values read")
    return exprs


def dashboard_panels(dashboard):
    """Every panel, those nested in collapsed rows included."""
    for p in dashboard.get("panels", []):
        yield p
        yield from p.get("panels", []) or []


def check_dashboard(path, problems):
    """[(panel label, expr)] of the dashboard; structural problems appended."""
    try:
        with open(path, encoding="utf-8") as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{path}: not valid JSON: {e}")
        return []
    if not isinstance(dashboard, dict) or not dashboard.get("panels"):
        problems.append(f"{path}: no panels")
        return []
    exprs = []
    seen = {}
    for p in dashboard_panels(dashboard):
        pid = p.get("id")
        label = f"panel {pid} ({p.get('title', 'untitled')!r})"
        if not isinstance(pid, int):
            problems.append(f"{path}: {label}: no integer id")
        elif pid in seen:
            problems.append(f"{path}: {label}: id {pid} also used by {seen[pid]}")
        else:
            seen[pid] = label
        if not isinstance(p.get("gridPos"), dict):
            problems.append(f"{path}: {label}: no gridPos")
        if p.get("type") == "row":
            continue
        targets = [t for t in p.get("targets", []) or [] if (t.get("expr") or "").strip()]
        if not targets:
            problems.append(f"{path}: {label}: no target with an expr")
        for t in targets:
            exprs.append((f"{label} target {t.get('refId', '?')}", t["expr"]))
    return exprs


def variable_exprs(path):
    """[(variable label, expr)]: the series selectors of the dashboard's query
    variables (label_values(SELECTOR, LABEL), query_result(EXPR))."""
    with open(path, encoding="utf-8") as f:
        dashboard = json.load(f)
    exprs = []
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        m = re.match(r"^\s*(?:label_values\((.*),\s*\w+\s*\)|query_result\((.*)\))\s*$", q, re.S)
        if m:
            exprs.append((f"variable {v.get('name')}", m.group(1) or m.group(2)))
    return exprs


def check_metrics(api_md, rules_yml, dashboard_json):
    problems = []
    families = documented_families(api_md)
    if not families:
        problems.append(f"{api_md}: no metric found in the '## Metrics' table")
    uses = []
    try:
        uses += [(f"{rules_yml}: rule {n}", e) for n, e in rule_exprs(rules_yml)]
    except (OSError, ValueError) as e:
        problems.append(str(e))
    uses += [(f"{dashboard_json}: {label}", e) for label, e in check_dashboard(dashboard_json, problems)]
    if not problems:
        uses += [(f"{dashboard_json}: {label}", e) for label, e in variable_exprs(dashboard_json)]
    checked = set()
    noted = set()
    for where, expr in uses:
        names = metric_names(expr)
        if not names:
            problems.append(f"{where}: selects no metric: {expr!r}")
        for name in sorted(names):
            if name in NOT_XLBD:
                continue
            family = name
            if family not in families:
                for suffix in HISTOGRAM_SUFFIXES:
                    if name.endswith(suffix) and name[: -len(suffix)] in families:
                        family = name[: -len(suffix)]
                        if families[family] != "histogram" and family not in noted:
                            noted.add(family)
                            print(f"note: {name}: {family} is documented as "
                                  f"{families[family] or 'untyped'}, not histogram")
                        break
            if family not in families:
                problems.append(f"{where}: {name} is not in {api_md}'s Metrics table")
            checked.add(family)
    if problems:
        return problems
    print(f"check_metrics: {len(uses)} expressions, {len(checked)} families, all in {api_md}")
    return []


def check_promql(promtool, dashboard_json):
    problems = []
    exprs = check_dashboard(dashboard_json, problems)
    if problems:
        return problems
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dashboard-exprs.yml")
        with open(path, "w", encoding="utf-8") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for n, (label, expr) in enumerate(exprs):
                expr = re.sub(r"\$\{?__(?:rate_interval|interval|range)\}?", "5m", expr)
                f.write(f"      # {label}\n")
                f.write(f"      - record: dashboard_expr_{n}\n")
                f.write(f"        expr: {json.dumps(expr)}\n")
        r = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
        if r.returncode != 0:
            out = (r.stdout + r.stderr).replace(path, "(the expressions as rules)").strip()
            bad = sorted({int(n) for n in re.findall(r"dashboard_expr_(\d+)", out)})
            named = "".join(f"\n  dashboard_expr_{n} = {exprs[n][0]}: {exprs[n][1]}" for n in bad)
            return [f"{dashboard_json}: promtool refuses an expression:\n{out}{named}"]
    print(f"check_metrics: {len(exprs)} dashboard expressions parse as PromQL")
    return []


def main(argv):
    if len(argv) == 5 and argv[1] == "metrics":
        problems = check_metrics(argv[2], argv[3], argv[4])
    elif len(argv) == 4 and argv[1] == "promql":
        problems = check_promql(argv[2], argv[3])
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for p in problems:
        print(f"check_metrics: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
