#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Independent checks of a Perfetto trace written by llmtracker-convert (CONTRACT §4b),
read with Python modules protoc generates from Perfetto's own .proto files
(tests/perfetto/protos).

usage: perfetto_check.py PYDIR TRACE.pftrace [--json TRACE.json[.gz]] [--stats]
                         [--expect-flows N]

Checks: every field is one the protos define (no unknown fields); each
sequence starts by clearing its incremental state, with packet defaults
(track, a sequence clock) and that clock's snapshot; every interned id
refers to an entry defined before on its sequence, each entry defined once
there (names appear once); timestamps never go back on a sequence; every
slice end closes a slice begun on its track and every slice is closed;
every track used is described; flows start once and end once. With --json:
the same slices and instants per track as the trace JSON, by category and
name, and each track's first event at the same time (µs from the run's
start). --stats also counts events by category and the calls folded slices
stand for. Prints one line per failed check and exits 1 if any failed; --stats
prints counts as JSON on stdout.
"""
import collections, gzip, json, sys

SEQ_CLEARED, SEQ_NEEDS = 1, 2
STEPS_TID = 4300000  # converter/output/trace_ids.h
MONOTONIC, SEQ_CLOCK = 3, 64


def unknown(msg, path, fails):
    """Fields the protos do not define, anywhere in msg."""
    from google.protobuf import unknown_fields
    if len(unknown_fields.UnknownFieldSet(msg)):
        fails.append("unknown fields in %s" % path)
    for fd, v in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        for i, m in enumerate(v if fd.label == fd.LABEL_REPEATED else [v]):
            unknown(m, "%s.%s[%d]" % (path, fd.name, i), fails)


class Seq:
    def __init__(self):
        self.cleared = False
        self.track = None
        self.clock = None
        self.last = None
        self.tabs = collections.defaultdict(dict)   # kind -> iid -> value
        self.seen = collections.defaultdict(set)    # kind -> values defined


def intern_entries(seq, idata, fails, sid):
    for kind in ("event_names", "event_categories", "debug_annotation_names",
                 "debug_annotation_string_values", "source_locations"):
        for e in getattr(idata, kind):
            if kind == "source_locations":
                val = (e.file_name, e.function_name, e.line_number)
            elif kind == "debug_annotation_string_values":
                val = e.str
            else:
                val = e.name
            if e.iid in seq.tabs[kind]:
                fails.append("seq %d: %s iid %d defined twice" % (sid, kind, e.iid))
            if val in seq.seen[kind]:
                fails.append("seq %d: %s %r interned twice" % (sid, kind, val))
            seq.tabs[kind][e.iid] = val
            seq.seen[kind].add(val)


def lookup(seq, kind, iid, fails, sid):
    if iid not in seq.tabs[kind]:
        fails.append("seq %d: %s iid %d used before it was defined" % (sid, kind, iid))
        return None
    return seq.tabs[kind][iid]


def main():
    args = sys.argv[1:]
    sys.path.insert(0, args.pop(0))
    from protos.perfetto.trace import trace_pb2
    from protos.perfetto.trace.track_event import track_event_pb2
    TE = track_event_pb2.TrackEvent
    path = args.pop(0)
    opt = {}
    while args:
        k = args.pop(0)
        opt[k] = True if k == "--stats" else args.pop(0)
    fails = []
    tr = trace_pb2.Trace()
    tr.ParseFromString(open(path, "rb").read())

    tracks = {}            # uuid -> descriptor
    seqs = collections.defaultdict(Seq)
    open_slices = collections.defaultdict(list)  # uuid -> [name]
    per_track = collections.defaultdict(collections.Counter)  # uuid -> (cat, name) -> n
    flows_s, flows_f = collections.Counter(), collections.Counter()
    primary = base = None
    first_ts = {}          # uuid -> the earliest event's time (trace clock)
    n_slices = n_instants = folded_calls = 0
    cat_count = collections.Counter()
    for i, p in enumerate(tr.packet):
        unknown(p, "packet[%d]" % i, fails)
        sid = p.trusted_packet_sequence_id
        if not sid:
            fails.append("packet %d without a sequence id" % i)
            continue
        seq = seqs[sid]
        if p.sequence_flags & SEQ_CLEARED:
            seqs[sid] = seq = Seq()
            seq.cleared = True
        if p.HasField("trace_packet_defaults"):
            d = p.trace_packet_defaults
            if not (p.sequence_flags & SEQ_CLEARED):
                fails.append("seq %d: packet defaults without clearing the state" % sid)
            seq.track = d.track_event_defaults.track_uuid
            seq.clock = d.timestamp_clock_id
        if p.HasField("clock_snapshot"):
            cs = p.clock_snapshot
            if cs.HasField("primary_trace_clock"):
                primary = cs.primary_trace_clock
                base = {c.clock_id: c.timestamp for c in cs.clocks}.get(MONOTONIC)
            clk = {c.clock_id: c for c in cs.clocks}
            if SEQ_CLOCK in clk:
                if not clk[SEQ_CLOCK].is_incremental or MONOTONIC not in clk or \
                        clk[MONOTONIC].timestamp != clk[SEQ_CLOCK].timestamp:
                    fails.append("seq %d: sequence clock not anchored to MONOTONIC" % sid)
                seq.last = clk[SEQ_CLOCK].timestamp
        if p.HasField("interned_data"):
            if not (p.sequence_flags & SEQ_NEEDS):
                fails.append("seq %d: interned data without SEQ_NEEDS_INCREMENTAL_STATE" % sid)
            intern_entries(seq, p.interned_data, fails, sid)
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.uuid in tracks:
                fails.append("track %d described twice" % d.uuid)
            tracks[d.uuid] = d
        if not p.HasField("track_event"):
            continue
        te = p.track_event
        if not seq.cleared or seq.clock != SEQ_CLOCK or seq.last is None:
            fails.append("seq %d: event before the state, defaults and clock" % sid)
            continue
        if not (p.sequence_flags & SEQ_NEEDS):
            fails.append("seq %d: event without SEQ_NEEDS_INCREMENTAL_STATE" % sid)
        seq.last += p.timestamp  # deltas: a uint64 cannot go back
        uuid = te.track_uuid if te.HasField("track_uuid") else seq.track
        if uuid not in tracks:
            fails.append("seq %d: event on undescribed track %d" % (sid, uuid))
        if te.type == TE.TYPE_SLICE_END:
            if not open_slices[uuid]:
                fails.append("track %d: slice end without a begin" % uuid)
            else:
                open_slices[uuid].pop()
            continue
        if te.HasField("name_iid"):
            name = lookup(seq, "event_names", te.name_iid, fails, sid)
        else:
            name = te.name
        cats = [lookup(seq, "event_categories", c, fails, sid) for c in te.category_iids]
        cats += list(te.categories)
        if len(cats) != 1:
            fails.append("track %d: %r has %d categories" % (uuid, name, len(cats)))
            continue
        for a in te.debug_annotations:
            an = a.name
            if a.HasField("name_iid"):
                an = lookup(seq, "debug_annotation_names", a.name_iid, fails, sid)
            if cats[0] == "folded" and an == "calls":
                folded_calls += a.uint_value
            if a.HasField("string_value_iid"):
                lookup(seq, "debug_annotation_string_values", a.string_value_iid, fails, sid)
        if te.HasField("source_location_iid"):
            lookup(seq, "source_locations", te.source_location_iid, fails, sid)
        for f in te.flow_ids:
            flows_s[f] += 1
        for f in te.terminating_flow_ids:
            flows_f[f] += 1
        per_track[uuid][(cats[0], name)] += 1
        first_ts[uuid] = min(first_ts.get(uuid, seq.last), seq.last)
        cat_count[cats[0]] += 1
        if te.type == TE.TYPE_SLICE_BEGIN:
            n_slices += 1
            open_slices[uuid].append(name)
        elif te.type == TE.TYPE_INSTANT:
            n_instants += 1
        else:
            fails.append("track %d: event of type %d" % (uuid, te.type))
    if primary != MONOTONIC:
        fails.append("primary trace clock %r, not MONOTONIC" % primary)
    for uuid, st in open_slices.items():
        if st:
            fails.append("track %d: %d slices never ended (%s)" % (uuid, len(st), st[-1]))
    for f, n in flows_s.items():
        if n != 1 or flows_f.get(f) != 1:
            fails.append("flow %d: %d starts, %d ends" % (f, n, flows_f.get(f, 0)))
    for f in flows_f:
        if f not in flows_s:
            fails.append("flow %d ends without a start" % f)
    if "--expect-flows" in opt and len(flows_s) != int(opt["--expect-flows"]):
        fails.append("%d flows, expected %s" % (len(flows_s), opt["--expect-flows"]))

    # tracks by the names the JSON gives them: (process, tid) or (GPU, stream)
    def key(uuid):
        d = tracks.get(uuid)
        if d is None:
            return ("?", uuid)
        if d.HasField("thread"):
            return (d.thread.pid, d.thread.tid)
        par = tracks.get(d.parent_uuid)
        if d.name == "Steps" and par is not None and par.HasField("process"):
            return (par.process.pid, STEPS_TID)
        if par is not None and d.name.startswith("stream "):
            return (par.name, int(d.name.split()[1]))
        return ("?", d.name)
    got = collections.defaultdict(collections.Counter)
    got_first = {}         # the JSON's µs from the run's start
    for uuid, c in per_track.items():
        got[key(uuid)].update(c)
        if base is not None:
            t = (first_ts[uuid] - base) / 1e3
            got_first[key(uuid)] = min(got_first.get(key(uuid), t), t)
    if "--json" in opt:
        compare_json(opt["--json"], got, got_first, fails)
    for f in fails[:50]:
        print(f)
    if len(fails) > 50:
        print("... %d more" % (len(fails) - 50))
    if "--stats" in opt:
        print(json.dumps({"packets": len(tr.packet), "slices": n_slices, "instants": n_instants,
                          "flows": len(flows_s), "tracks": len(got), "sequences": len(seqs),
                          "cats": cat_count, "folded_calls": folded_calls}))
    return 1 if fails else 0


def compare_json(path, got, got_first, fails):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        ev = json.load(f)["traceEvents"]
    pname, gpu = {}, set()
    for e in ev:
        if e.get("ph") == "M" and e["name"] == "process_name":
            pname[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e["name"] == "process_labels" and \
                str(e["args"].get("labels", "")).startswith("GPU"):
            gpu.add(e["pid"])
    want = collections.defaultdict(collections.Counter)
    want_first = {}
    for e in ev:
        if e.get("ph") in ("X", "i"):
            k = (pname.get(e["pid"], e["pid"]), e["tid"]) if e["pid"] in gpu else (e["pid"], e["tid"])
            want[k][(e["cat"], e["name"])] += 1
            want_first[k] = min(want_first.get(k, e["ts"]), e["ts"])
    for k, t in want_first.items():
        if k in got_first and abs(got_first[k] - t) > 0.002:
            fails.append("track %r: first event at %.3f us in the JSON, %.3f in the Perfetto trace" %
                         (k, t, got_first[k]))
    for k in sorted(set(want) | set(got), key=str):
        w, g = want.get(k, collections.Counter()), got.get(k, collections.Counter())
        if sum(w.values()) != sum(g.values()):
            fails.append("track %r: %d events in the JSON, %d in the Perfetto trace" %
                         (k, sum(w.values()), sum(g.values())))
        elif w != g:
            diff = (w - g) + (g - w)
            fails.append("track %r: same count, different events: %r" % (k, list(diff.items())[:3]))


if __name__ == "__main__":
    sys.exit(main())
