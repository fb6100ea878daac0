# SPDX-License-Identifier: GPL-2.0-or-later
"""A strict parser of Prometheus' text exposition format (version 0.0.4),
for what `vdpa-poolctl metrics` writes: every line a HELP, TYPE or sample;
HELP and TYPE once per family and before its samples; a family's samples
together; label values with only the format's escapes; no series twice;
each histogram's buckets cumulative and ending at +Inf = _count.  A
violation raises AssertionError naming the line."""
import math
import re

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"


class Family:
    def __init__(self, name):
        self.name, self.type, self.help, self.samples = name, None, None, []


def _labels(text, line):
    """{name: value} of a sample's label set text (without the braces),
    only the escapes \\\\, \\" and \\n allowed in values."""
    out, i = {}, 0
    while i < len(text):
        m = re.compile(LABEL + r'="').match(text, i)
        assert m, f"bad label at {text[i:]!r}: {line!r}"
        name, i, value = m.group(0)[:-2], m.end(), []
        while text[i] != '"':
            if text[i] == "\\":
                esc = text[i + 1]
                assert esc in '\\"n', f"bad escape \\{esc}: {line!r}"
                value.append("\n" if esc == "n" else esc)
                i += 2
            else:
                assert text[i] != "\n"
                value.append(text[i])
                i += 1
        i += 1
        assert name not in out, f"label {name} twice: {line!r}"
        out[name] = "".join(value)
        if i < len(text):
            assert text[i] == ",", f"no comma after a label: {line!r}"
            i += 1
    return out


def _value(text, line):
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    assert re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text), \
        f"bad value {text!r}: {line!r}"
    return float(text)


def parse(text):
    """{family name: Family}; raises AssertionError on anything the format
    does not allow."""
    fams, order, series = {}, [], set()
    assert text.endswith("\n"), "the text must end with a newline"
    for line in text[:-1].split("\n"):
        m = re.fullmatch(rf"# (HELP|TYPE) ({NAME}) (.*)", line)
        if m:
            kind, name, rest = m.groups()
            f = fams.get(name)
            if f is None:
                f = fams[name] = Family(name)
                order.append(name)
            assert order[-1] == name, f"{kind} of {name} after another family: {line!r}"
            assert not f.samples, f"{kind} of {name} after its samples"
            if kind == "HELP":
                assert f.help is None, f"HELP of {name} twice"
                assert not re.search(r"\\[^\\n]", rest), f"bad escape in HELP: {line!r}"
                f.help = rest
            else:
                assert f.type is None, f"TYPE of {name} twice"
                assert rest in ("counter", "gauge", "histogram", "summary", "untyped"), line
                f.type = rest
            continue
        assert not re.match(r"# (HELP|TYPE)\b", line), f"bad HELP/TYPE line {line!r}"
        if line.startswith("#") or not line.strip():
            continue
        m = re.fullmatch(rf"({NAME})(?:\{{(.*)\}})? (\S+)(?: (-?\d+))?", line)
        assert m, f"not a sample: {line!r}"
        name, labels, value = m.group(1), _labels(m.group(2) or "", line), _value(m.group(3), line)
        fam = next((n for n in (name, re.sub(r"_(bucket|sum|count)$", "", name))
                    if n in fams and (n == name or fams[n].type == "histogram")), None)
        assert fam, f"sample {name} of no family declared before it"
        assert order[-1] == fam, f"sample of {fam} after another family: {line!r}"
        key = (name, tuple(sorted(labels.items())))
        assert key not in series, f"series twice: {line!r}"
        series.add(key)
        fams[fam].samples.append((name, labels, value))
    for f in fams.values():
        assert f.type, f"family {f.name} without TYPE"
        if f.type == "counter":
            assert all(v >= 0 for _, _, v in f.samples), f.name
        if f.type == "histogram":
            _check_histogram(f)
    return fams


def _check_histogram(f):
    groups = {}
    for name, labels, value in f.samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        g = groups.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if name.endswith("_bucket"):
            g["buckets"].append((_value(labels["le"], labels["le"]), value))
        else:
            g[name.rsplit("_", 1)[1]] = value
    for key, g in groups.items():
        les = [le for le, _ in g["buckets"]]
        assert les == sorted(les) and les[-1] == math.inf, f"{f.name}{key}: le {les}"
        counts = [c for _, c in g["buckets"]]
        assert counts == sorted(counts), f"{f.name}{key}: buckets not cumulative {counts}"
        assert g["count"] == counts[-1] and g["sum"] is not None, f"{f.name}{key}: {g}"


def samples(fams, name, **labels):
    """{vf or other remaining label set: value} of a family's samples whose
    labels include labels."""
    fam = name if name in fams else re.sub(r"_(bucket|sum|count)$", "", name)
    return [(lab, v) for n, lab, v in fams[fam].samples
            if n == name and all(lab.get(k) == w for k, w in labels.items())]


def one(fams, name, **labels):
    got = samples(fams, name, **labels)
    assert len(got) == 1, (name, labels, got)
    return got[0][1]
