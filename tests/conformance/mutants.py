#!/usr/bin/env python3
# tests/conformance/mutants.py: break the simulated fabric one way at a time; each check must catch its mutant.
"""
A check that cannot fail proves nothing. Each mutant below is one small edit of the
simulated fabric (backends/sim), the kind of mistake a backend author makes, paired with the
check of ntbfab-conformance that must report it. The script copies the source tree (tracked
and new files) into a temporary directory, builds it there, and for each mutant applies the
edit, rebuilds, runs that check on the mutant's cluster file, and restores the file. The
working tree and its build directories are never touched.

usage: python3 tests/conformance/mutants.py [SUBSTRING...]   (only mutants whose name matches)
Exit status 0 when every mutant was caught by its check, 1 otherwise. It takes about a
minute: every mutant relinks libntbfab, and a few wait out the suite's 2 s event timeout.
"""
import os
import shutil
import subprocess
import sys
import tempfile


class M:
    def __init__(self, check, what, path, config, edits):
        self.check, self.what, self.path, self.config, self.edits = check, what, path, config, edits


MUTANTS = [
    M('vtable',
      'sim ops without rid_del',
      'backends/sim/ops.c', 'b2b',
      [('    .rid_del = sim_rid_del,\n', '    .rid_del = NULL,\n'), ('#include <errno.h>\n', '#pragma GCC diagnostic ignored "-Wunused-function"\n#include <errno.h>\n')]),
    M('caps.flags',
      'NTBF_CAP_MESSAGE claimed without message registers',
      'backends/sim/ops.c', 'b2b',
      [('        if (x->nmsgs)\n                c->flags |= NTBF_CAP_MESSAGE;', '        c->flags |= NTBF_CAP_MESSAGE;')]),
    M('caps.flags',
      'switch_rid_add programs any switch, whatever the adapter reaches (the sim bug fixed in 67cbe7b)',
      'backends/sim/ops.c', 'switch',
      [('                return -EINVAL;\n        int reach = switch_reach(s, h->adapter, sw);\n        if (reach)\n                return reach;\n        const struct sim_switch *x = &s->sw[sw];\n        if (!x->nrids)\n                return NTBF_EUNSUPPORTED;\n        uint64_t e = rid_entry(r->node, r->rid, r->mask);\n        const uint32_t *links', '                return -EINVAL;\n        const struct sim_switch *x = &s->sw[sw];\n        if (!x->nrids)\n                return NTBF_EUNSUPPORTED;\n        uint64_t e = rid_entry(r->node, r->rid, r->mask);\n        const uint32_t *links')]),
    M('caps.flags',
      'an adapter without doorbells rings the peer\'s (the sim bug fixed in 766591f)',
      'backends/sim/ops.c', 'switch',
      [('        int r = peer_ok(h, peer, s->ad[h->adapter].ndb);', '        int r = peer_ok(h, peer, 1);')]),
    M('caps.figures',
      'rid_reserved reported one too high',
      'backends/sim/ops.c', 'b2b',
      [('        c->rid_reserved = x->rid_reserved;', '        c->rid_reserved = x->rid_reserved + 1;')]),
    M('events.idle',
      'process_events waits 200 ms for something to happen',
      'backends/sim/ops.c', 'b2b',
      [('        const struct ntbf_event_ops *ops = h->ops;\n        int n = 0;', '        const struct ntbf_event_ops *ops = h->ops;\n        int n = 0;\n        usleep(200000);')]),
    M('events.fd',
      'process_events does not drain the eventfd',
      'backends/sim/ops.c', 'b2b',
      [('        while (read(h->efd, &v, sizeof(v)) == sizeof(v))\n                ;', '        (void)v;')]),
    M('events.fd',
      "peer_db_set does not signal the peer's handles",
      'backends/sim/ops.c', 'b2b',
      [('        atomic_fetch_add(&x->db_seq, 1);\n        ntbf__sim_adapter_event(s, peer);\n        return 0;\n}', '        atomic_fetch_add(&x->db_seq, 1);\n        return 0;\n}')]),
    M('mem',
      'alignment above a page ignored',
      'backends/sim/mem.c', 'b2b',
      [('        if (align < SIM_PAGE)\n                align = SIM_PAGE;', '        align = SIM_PAGE;')]),
    M('mem',
      'memory freed and allocated again keeps the previous owner\'s bytes (neither free nor alloc clears it)',
      'backends/sim/mem.c', 'b2b',
      [('        /* Fresh memory reads as zeros, whatever a previous owner left there. */\n        punch(s, node, base, size);', '        (void)punch;'),
       ('        punch(s, node, m->bus_addr, ntbf_align_up(m->size, SIM_PAGE));', '')]),
    M('map.offset',
      'map_window maps from the start of the slot holding the offset',
      'backends/sim/map.c', 'b2b',
      [('        m->base = ad->win[win].base + offset;', '        m->base = ad->win[win].base + offset - offset % ad->win[win].slot_size;')]),
    M('map.live',
      'programming a slot that is already valid does not remap live mappings',
      'backends/sim/ops.c', 'b2b',
      [('        atomic_store_explicit(&sim_slots(s, a)[slot], e, memory_order_release);\n        ntbf__sim_changed(s);',
        '        atomic_store_explicit(&sim_slots(s, a)[slot], e, memory_order_release);\n        if (!(old & SLOT_VALID))\n                ntbf__sim_changed(s);')]),
    M('map.process',
      'releasing an adapter clears every slot of it, whoever programmed them',
      'backends/sim/ops.c', 'b2b',
      [('        pthread_mutex_unlock(&s->lock);\n        ntbf__sim_watcher_kick(s);\n        close(h->efd);',
        '        pthread_mutex_unlock(&s->lock);\n        for (uint32_t k = 0; k < s->ad[h->adapter].nslots; k++)\n                atomic_store(&sim_slots(s, h->adapter)[k], 0);\n        ntbf__sim_changed(s);\n        ntbf__sim_watcher_kick(s);\n        close(h->efd);')]),
    M('xlat.outbound',
      'the last slot is never written',
      'backends/sim/ops.c', 'b2b',
      [('        atomic_store_explicit(&sim_slots(s, a)[slot], e, memory_order_release);', '        if (slot + 1 < ad->p.lut_entries)\n                atomic_store_explicit(&sim_slots(s, a)[slot], e, memory_order_release);')]),
    M('xlat.inbound',
      'peer_xlat_set rounds a misaligned address down instead of refusing it',
      'backends/sim/ops.c', 'switch',
      [('        struct ntbf_xlat x = {A(h)->node, h->adapter, local_addr, NTBF_NONE, size};', '        struct ntbf_xlat x = {A(h)->node, h->adapter, local_addr & ~(s->t->adapters[peer].lut_entry_size - 1), NTBF_NONE, size};')]),
    M('rid.table',
      "the table's last entry is never used",
      'backends/sim/ops.c', 'b2b',
      [('        for (uint32_t i = lo; i < n; i++) {\n                uint64_t expect = 0;', '        for (uint32_t i = lo; i + 1 < n; i++) {\n                uint64_t expect = 0;')]),
    M('rid.drop',
      "the router ignores the adapter's requester table",
      'backends/sim/route.c', 'b2b',
      [('        if (x->nrids && !rid_in(sim_rids(s, a), x->nrids, node, rid)) {', '        if (0 && x->nrids && !rid_in(sim_rids(s, a), x->nrids, node, rid)) {')]),
    M('rid.mask',
      'requester matching ignores the mask',
      'backends/sim/layout.h', 'b2b',
      [('(uint16_t)(rid & mask) == (uint16_t)(e >> 16);', '(uint16_t)(rid | (mask & 0)) == (uint16_t)(e >> 16);')]),
    M('rid.switch',
      'switch_rid_del deletes on the first port only',
      'backends/sim/ops.c', 'switch',
      [('                    !table_del(sim_swrids(s, sw, p), 0, x->nrids, e))\n                        gone++;', '                    !table_del(sim_swrids(s, sw, p), 0, x->nrids, e)) {\n                        gone++;\n                        break;\n                }')]),
    M('rid.switch.drop',
      'switches never check requesters',
      'backends/sim/route.c', 'switch',
      [('                        if (!sw->nrids)\n                                continue;', '                        continue;')]),
    M('link.state',
      'a port without a cable reports up',
      'backends/sim/ops.c', 'b2b',
      [('        return l != NTBF_NONE && ntbf__sim_link_up(s, l);', '        return l == NTBF_NONE || ntbf__sim_link_up(s, l);')]),
    M('link.cycle',
      'a link change raises an event at end 0 only',
      'backends/sim/ops.c', 'b2b',
      [('        for (int e = 0; e < 2; e++)\n                if (lk->end[e].kind == NTBF_PORT_ADAPTER)', '        for (int e = 0; e < 1; e++)\n                if (lk->end[e].kind == NTBF_PORT_ADAPTER)')]),
    M('doorbell',
      'bit 15 is lost when rung',
      'backends/sim/ops.c', 'b2b',
      [('        atomic_fetch_or(&x->db, bits);', '        atomic_fetch_or(&x->db, bits & 0x7fff);')]),
    M('doorbell.mask',
      'unmasking a pending bit raises nothing',
      'backends/sim/ops.c', 'b2b',
      [('        if (old & bits & atomic_load(&x->db)) {', '        if (0 && (old & bits & atomic_load(&x->db))) {')]),
    M('spad',
      'peer_spad_read reads the local scratchpads',
      'backends/sim/ops.c', 'b2b',
      [('        *val = atomic_load(&sim_spads(s, peer)[idx]);', '        *val = atomic_load(&sim_spads(s, h->adapter)[idx]);')]),
    M('msg',
      'a message names the receiver as its sender',
      'backends/sim/ops.c', 'switch',
      [('        uint64_t e = MSG_FULL | (uint64_t)h->adapter << 32 | val;', '        uint64_t e = MSG_FULL | (uint64_t)peer << 32 | val;')]),
    M('iommu',
      'iommu_unmap unmaps nothing',
      'backends/sim/iommu.c', 'b2b',
      [('        uint8_t *base = iommu_base(s, node, false);\n        if (base)\n                unmap_pages(', '        uint8_t *base = iommu_base(s, node, false);\n        if (0 && base)\n                unmap_pages(')]),
    M('irq',
      'an MSI signals the next vector',
      'backends/sim/irq.c', 'b2b',
      [('        struct sim_irqrec *v = &n->irq[data];', '        struct sim_irqrec *v = &n->irq[data + 1 < SIM_IRQ_VECTORS ? data + 1 : data];')]),
    M('mcast',
      'the last adapter of the fabric never receives group writes',
      'backends/sim/route.c', 'switch',
      [('        for (uint32_t m = 0; m < s->t->nadapters; m++) {\n                uint64_t base, size;', '        for (uint32_t m = 0; m + 1 < s->t->nadapters; m++) {\n                uint64_t base, size;')]),
    M('dma.copy',
      'copies longer than a page lose their last byte',
      'backends/sim/dma.c', 'b2b',
      [('                d->len = len;', '                d->len = len > 4096 ? len - 1 : len;')]),
    M('dma.order',
      'dma_submit ignores the channel (every descriptor goes to channel 0)',
      'backends/sim/dma.c', 'b2b',
      [('        struct sim_dmachan *c = sim_dma(s, a, chan);\n        int r = 0;\n        ntbf__sim_lock(s, &c->lock, ntbf__sim_dma_recover, c);\n        uint64_t head', '        struct sim_dmachan *c = sim_dma(s, a, 0);\n        int r = 0;\n        ntbf__sim_lock(s, &c->lock, ntbf__sim_dma_recover, c);\n        uint64_t head')]),
    M('dma.error',
      'the engine reports status 0 whatever happened',
      'backends/sim/dma.c', 'b2b',
      [('                        d->status = copy(s, node, d->src, d->dst, d->len, bounce, bounce_len);', '                        copy(s, node, d->src, d->dst, d->len, bounce, bounce_len);\n                        d->status = 0;')]),
    M('reset',
      'doorbell masks survive a reset',
      'backends/sim/ops.c', 'b2b',
      [('        atomic_store(&x->db, 0);\n        atomic_store(&x->db_mask, 0);', '        atomic_store(&x->db, 0);')]),
    M('counters',
      'a link-down drop counted as a master abort',
      'backends/sim/route.c', 'b2b',
      [('        case NTBF_ELINKDOWN:\n                v = &c->drop_link_down;', '        case NTBF_ELINKDOWN:\n                v = &c->master_abort;')]),
    M('args',
      'spad_write accepts the index one past the last',
      'backends/sim/ops.c', 'b2b',
      [('        if (idx >= s->ad[h->adapter].nspads)\n                return -EINVAL;\n        atomic_store(&sim_spads(s, h->adapter)[idx], val);', '        if (idx > s->ad[h->adapter].nspads)\n                return -EINVAL;\n        atomic_store(&sim_spads(s, h->adapter)[idx], val);')]),
    M('irq.trigger',
      'irq_trigger writes other data than the vector\'s',
      'backends/sim/ops.c', 'b2b',
      [('                              addr, &data, sizeof(data), NULL);', '                              addr, &(uint32_t){data ^ 1}, sizeof(data), NULL);')]),
    M('host_map',
      'host_map maps the page of the address, not the address',
      'backends/sim/ops.c', 'b2b',
      [('        int r = ntbf_sim_phys_ptr((struct ntbf_backend *)S(h), A(h)->node, addr, size, out);', '        int r = ntbf_sim_phys_ptr((struct ntbf_backend *)S(h), A(h)->node, addr & ~UINT64_C(4095), size, out);')]),
    M('host_bus',
      'host_bus answers the region\'s base, not the address in it',
      'backends/sim/fabric.c', 'b2b',
      [('        *bus = r->base + (uint64_t)(a - (fbase + foff));', '        *bus = r->base;')]),
]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main():
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
    only = sys.argv[1:]
    scratch = tempfile.mkdtemp(prefix='ntbfab-mutants-')
    try:
        files = run(['git', '-C', src, 'ls-files', '-z', '--cached', '--others',
                     '--exclude-standard']).stdout.split('\0')
        for f in filter(None, files):
            if os.path.isfile(os.path.join(src, f)):
                os.makedirs(os.path.join(scratch, os.path.dirname(f)), exist_ok=True)
                shutil.copy2(os.path.join(src, f), os.path.join(scratch, f))
        build = os.path.join(scratch, 'build')
        r = run(['meson', 'setup', build, '-Dbench=false'], cwd=scratch)
        if r.returncode or run(['ninja', '-C', build]).returncode:
            print('cannot build the scratch copy:', r.stdout[-2000:], r.stderr[-2000:])
            return 1
        suite = os.path.join(build, 'tests', 'conformance', 'ntbfab-conformance')
        survived = 0
        for m in MUTANTS:
            if only and not any(o in m.check + ' ' + m.what for o in only):
                continue
            path = os.path.join(scratch, m.path)
            clean = open(path).read()
            text = clean
            for old, new in m.edits:
                assert text.count(old) == 1, (m.what, old)
                text = text.replace(old, new)
            open(path, 'w').write(text)
            b = run(['ninja', '-C', build])
            if b.returncode:
                print('BUILD FAILED  %-16s %s\n%s' % (m.check, m.what, b.stdout[-1500:]))
                survived += 1
            else:
                p = run([suite, '--backend', 'sim', '--only', m.check, '--config',
                         os.path.join(src, 'tests', 'conformance', m.config + '.yaml')],
                        timeout=600)
                lines = p.stdout.splitlines()
                caught = [i for i, l in enumerate(lines)
                          if l.startswith('not ok') and (' - %s [' % m.check) in l]
                if caught and p.returncode == 1:
                    i = caught[0]
                    why = lines[i + 1].strip('# ') if i + 1 < len(lines) else ''
                    print('caught        %-16s %s\n              %s' % (m.check, m.what, why))
                else:
                    print('NOT CAUGHT    %-16s %s (exit %d)' % (m.check, m.what, p.returncode))
                    survived += 1
            open(path, 'w').write(clean)
        run(['ninja', '-C', build])
        print('%d mutant(s) not caught' % survived if survived else 'every mutant was caught')
        return 1 if survived else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
