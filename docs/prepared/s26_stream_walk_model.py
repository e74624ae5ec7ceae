# A host model of s26_fused_stream.patch's item walk (chain_o.cuh: stream_start, stream_advance, stream_desc):
# G blocks claim items from one counter in a random interleaving; checks that every item of a non-empty sequence
# is walked by exactly one block, its chunks in order with the first / last flags right, that a block moves to
# another item only after an item's last chunk, and that every empty item is copied exactly once.
# `python3 docs/prepared/s26_stream_walk_model.py` (3000 random batches) prints ok.
import random
def run(counts, HV, G, seed):
    rnd = random.Random(seed)
    items = len(counts) * HV * 2
    counter = [0]
    def claim(): x = counter[0]; counter[0] += 1; return G + x
    def seq(item): return item // (2 * HV)
    class W: pass
    emitted = []; empties = []
    blocks = []
    for b in range(G):
        w = W(); w.items = items; w.item = -1; w.next_item = b; w.claim = None; w.c = 0; w.cur = 0
        w.next = counts[seq(b)] if b < items else None
        w.b = b; w.out = []
        blocks.append(w)
    rnd.shuffle(blocks)
    for w in blocks: w.claim = claim()  # stream_start's claim (blocks in any order)
    def advance(w):
        if w.item >= w.items: return
        w.c += 1
        if w.c < w.cur: return
        while True:
            w.item = w.next_item
            if w.item >= w.items: return
            w.cur = w.next; w.c = 0
            w.next_item = w.claim; w.claim = claim()
            if w.next_item < w.items: w.next = counts[seq(w.next_item)]
            if w.cur > 0: return
            empties.append(w.item)
    def desc(w):
        if w.item >= w.items: return None
        return (w.item, w.c, w.c == 0, w.c == w.cur - 1)
    # start: advance once (enter first item)
    for w in blocks:
        advance(w)  # (stream_start's advance: item -1 -> first) -- note ++c (1) < cur (0) false
    live = list(blocks)
    while live:
        w = rnd.choice(live)
        d = desc(w)
        if d is None: live.remove(w); continue
        w.out.append(d); advance(w)
    # check: each item with count>0 appears exactly once per chunk in order, flags right; empties once
    seen = {}
    for w in blocks:
        prev = None
        for (item, c, first, last) in w.out:
            seen.setdefault(item, []).append(c)
            assert first == (c == 0) and last == (c == counts[seq(item)] - 1)
            if prev is not None and prev[0] != item: assert prev[3], "item switched before its last chunk"
            if prev is not None and prev[0] == item: assert c == prev[1] + 1
            prev = (item, c, first, last)
    for item in range(items):
        n = counts[seq(item)]
        if n == 0: assert empties.count(item) == 1, item; assert item not in seen
        else: assert seen[item] == list(range(n)), (item, seen.get(item))
    return True
for s in range(3000):
    r = random.Random(s)
    N = r.randint(1, 7); HV = r.choice([1, 2, 4]); G = r.randint(1, 12)
    counts = [r.choice([0, 0, 1, 1, 2, 3, 5]) for _ in range(N)]
    run(counts, HV, G, s)
print("ok")
