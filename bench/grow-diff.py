#!/usr/bin/env python3
"""What grew between two heaptrack flame-graph stack files of `--flamegraph-cost-type leaked`
(bench/grow-heap.sh): bytes and bytes a second by call site, the allocator's and the standard
library's frames left out. Usage: bench/grow-diff.py EARLY.stacks LATE.stacks SECONDS_APART [DEPTH] [ROWS]"""
import sys, re, collections
SKIP = re.compile(r'\((unix|alloc|mod|raw_vec|spec_extend|spec_from_elem|spec_from_iter|spec_from_iter_nested|boxed|iterator|function|rt|panicking|panic|backtrace|cow|string|clone|slice|str|vec_deque|map|set|btree_map|node|fmt|macros|mem|option|result|ops|deque|in_place_collect|sync|arc|rc|borrow|hint|ptr|cmp|iter|into_iter|alloc_zeroed|extend|collect|mod_rs|try_trait|convert|sort|stable|smallsort|merge|drift|quicksort|heapsort|range|traits|adapters|map_iter|chain|cloned|copied|enumerate|filter|flatten|zip|take|skip|rev|step_by|peekable|fuse|inspect|scan|try_fold|fold)\.rs\)$|^0x|^\?\?|malloc|^allocate|finish_grow|^grow|^reserve|do_reserve|^with_capacity|^from_elem|^to_vec|^clone|^extend|^push|^insert|^collect|^from_iter')
def load(path, depth):
    agg = collections.Counter()
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if not line: continue
        stack, _, n = line.rpartition(' ')
        frames = [f.strip() for f in stack.split(';')]
        inner = [f for f in reversed(frames) if not SKIP.search(f)]
        label = ' <- '.join(inner[:depth]) or ' <- '.join(reversed(frames[-4:]))
        agg[label[:300]] += int(n)
    return agg
depth = int(sys.argv[4]) if len(sys.argv) > 4 else 2
a = load(sys.argv[1], depth); b = load(sys.argv[2], depth); dt = float(sys.argv[3])
tot = sum(b.values()) - sum(a.values())
print(f'total leaked diff {tot} B = {tot/dt:.0f} B/s = {tot/dt*3600/1e6:.2f} MB/h')
for k in sorted(set(a) | set(b), key=lambda k: -abs(b[k] - a[k]))[:int(sys.argv[5]) if len(sys.argv) > 5 else 25]:
    d = b[k] - a[k]
    print(f'{d:>9} {d/dt:7.1f} B/s {d/dt*3600/1e6:6.2f} MB/h  {k}')
