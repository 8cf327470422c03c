#!/usr/bin/python3
"""prom_check.py - reads a Prometheus exposition on stdin and parses it
with the Prometheus project's own Python parser (Debian's
python3-prometheus-client), so that test_serve checks the status page
against a real parser, not against itself.  Prints one line per family,
"NAME TYPE SAMPLES"; checks every histogram (buckets cumulative, +Inf equal
to _count); exits 1 with the reason on any error."""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and friends
        print("parse error: %s" % e)
        return 1
    for f in families:
        print("%s %s %d" % (f.name, f.type, len(f.samples)))
        if f.type != "histogram":
            continue
        by = {}
        for s in f.samples:
            key = s.labels.get("sandbox")
            by.setdefault(key, {"buckets": [], "count": None})
            if s.name.endswith("_bucket"):
                by[key]["buckets"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                by[key]["count"] = s.value
        for key, h in by.items():
            values = [v for _, v in sorted(h["buckets"])]
            if values != sorted(values):
                print("histogram %s{sandbox=%s}: buckets not cumulative" % (f.name, key))
                return 1
            if not h["buckets"] or h["buckets"][-1][0] != float("inf") or values[-1] != h["count"]:
                print("histogram %s{sandbox=%s}: +Inf bucket is not _count" % (f.name, key))
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
