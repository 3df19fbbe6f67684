#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Copy the Perfetto protos the tests need from a Perfetto checkout (README.md).

usage: vendor.py PERFETTO_CHECKOUT OUT_DIR
"""
# Imports outside the copied set are dropped, with the fields of the types
# they define.
import re, subprocess, sys, os
REPO = sys.argv[1]
OUT = sys.argv[2]
full = ['trace/trace.proto', 'trace/clock_snapshot.proto', 'common/builtin_clock.proto',
        'trace/track_event/debug_annotation.proto', 'trace/track_event/source_location.proto',
        'trace/track_event/process_descriptor.proto', 'trace/track_event/thread_descriptor.proto',
        'trace/track_event/counter_descriptor.proto', 'trace/track_event/state_descriptor.proto',
        'trace/profiling/profile_common.proto']
trim = ['trace/trace_packet.proto', 'trace/trace_packet_defaults.proto',
        'trace/interned_data/interned_data.proto', 'trace/track_event/track_event.proto',
        'trace/track_event/track_descriptor.proto']
def path(f): return 'protos/perfetto/' + f
files = [path(f) for f in full + trim]
def show(p): return subprocess.run(['git', '-C', REPO, 'show', 'HEAD:' + p], capture_output=True, text=True, check=True).stdout
# every type defined in the vendored files
defined = set()
for p in files:
    for m in re.finditer(r'^\s*(?:message|enum)\s+(\w+)', show(p), re.M):
        defined.add(m.group(1))
scalars = set('double float int32 int64 uint32 uint64 sint32 sint64 fixed32 fixed64 sfixed32 sfixed64 bool string bytes'.split())
for p in files:
    src = show(p)
    if path_in := p in [path(f) for f in trim]:
        out, dropped = [], []
        lines = src.split('\n')
        i = 0
        while i < len(lines):
            ln = lines[i]
            m = re.match(r'^import "(.*)";', ln)
            if m and m.group(1) not in files:
                dropped.append(m.group(1)); i += 1; continue
            m = re.match(r'^\s*(?:optional |repeated |required )?([\w.]+)\s+(\w+)\s*=?', ln)
            if m and m.group(1) not in ('message', 'enum', 'oneof', 'reserved', 'extensions', 'option', 'import', 'package', 'syntax', 'return', 'map') and not ln.strip().startswith('//'):
                t = m.group(1).split('.')[0]
                if t not in scalars and t not in defined:
                    # the declaration may continue on the next line(s)
                    j = i
                    while ';' not in lines[j]: j += 1
                    dropped.append(' '.join(x.strip() for x in lines[i:j+1]))
                    # drop the comment block right above it
                    while out and out[-1].strip().startswith('//'): out.pop()
                    i = j + 1; continue
            out.append(ln); i += 1
        src = '\n'.join(out)
        note = ('// Vendored for llmtracker\'s tests: fields and imports of types the\n'
                '// converter never writes are left out (see tests/perfetto/README.md).\n')
        src = src.replace('syntax = "proto2";', note + 'syntax = "proto2";', 1)
        print(p, 'dropped:', file=sys.stderr)
        for d in dropped: print('   ', d, file=sys.stderr)
    os.makedirs(os.path.dirname(os.path.join(OUT, p)), exist_ok=True)
    open(os.path.join(OUT, p), 'w').write(src)
