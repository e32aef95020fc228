/* SRAM unit: reads/writes, atomics, rings and queue arrays.
 *
 * Queue arrays (npkit model of the HRM "SRAM queue array"): a queue
 * descriptor is three longwords in SRAM at the descriptor address:
 * head, tail, count.  Buffers are linked through their first longword
 * (next pointer, 0 = end).  enqueue links a buffer at the tail, dequeue
 * unlinks the head and returns it (0 when empty), rd_qdesc_* copy the
 * descriptor to transfer registers, wr_qdesc* are accepted and change
 * nothing because the descriptor already lives in SRAM (the Q_array cache
 * is not modelled separately).
 *
 * Rings (put/get/journal): descriptor of five longwords at the ring address:
 * head index, tail index, count, base byte address, size in longwords.
 * get of more entries than present returns zeros and takes nothing; put to
 * a full ring drops the data (NPK_FAULT_RING_FULL); journal overwrites the
 * oldest entry.  A descriptor of size 0 is a ring never configured
 * (NPK_FAULT_RING_UNCONFIGURED, nothing happens); head, tail or count outside
 * the size is NPK_FAULT_RING_BAD (nothing happens).
 *
 * Addresses: channel = addr[31:30], offset = addr[29:0], longword access (the
 * low two bits are ignored).  A missing channel or an offset past the
 * channel's memory is NPK_FAULT_SRAM (HRM p.218: unpredictable on the part):
 * reads return 0, writes are dropped. */
#include "../internal.h"

int npk_sram_addr(npk_chip *c, uint32_t addr, uint64_t *off)
{
    if (npk_sram_span(c, addr, 4, off)) return 1;
    npk_fault_cmd(c, NPK_FAULT_SRAM, addr);
    return 0;
}

static uint32_t srd(npk_chip *c, uint32_t addr)
{
    uint64_t o;
    return npk_sram_addr(c, addr & ~3u, &o) ? npk_rd32(c->sram + o) : 0;
}

static void swr(npk_chip *c, uint32_t addr, uint32_t v)
{
    uint64_t o;
    if (npk_sram_addr(c, addr & ~3u, &o)) {
        npk_wr32(c->sram + o, v);
        if (c->nwp_mem) npk_mem_watch(c, NPK_MEM_SRAM, addr & ~3u, 4);
    }
}

static void ring_op(npk_chip *c, npk_event *e, uint32_t *out, int kind /*0 get,1 put,2 journal*/)
{
    uint32_t d = e->addr & ~3u;
    uint32_t head = srd(c, d), tail = srd(c, d + 4), count = srd(c, d + 8);
    uint32_t base = srd(c, d + 12), size = srd(c, d + 16);
    uint32_t n = e->count;
    if (!size) { npk_fault_cmd(c, NPK_FAULT_RING_UNCONFIGURED, d); return; }
    if (head >= size || tail >= size || count > size) { npk_fault_cmd(c, NPK_FAULT_RING_BAD, d); return; }
    if (kind == 0) {
        if (count >= n) {
            for (uint32_t i = 0; i < n; i++) {
                out[i] = srd(c, base + 4 * head);
                head = (head + 1) % size;
            }
            count -= n;
        }
    } else {
        for (uint32_t i = 0; i < n && i < NPK_MAX_XFER_WORDS; i++) {
            if (count >= size) {
                if (kind == 1) { npk_fault_cmd(c, NPK_FAULT_RING_FULL, d); break; }
                head = (head + 1) % size;
                count--;
            }
            swr(c, base + 4 * tail, e->data[i]);
            tail = (tail + 1) % size;
            count++;
        }
    }
    swr(c, d, head % size);
    swr(c, d + 4, tail % size);
    swr(c, d + 8, count);
}

NPK_WORD_COMMANDS(sram, srd, swr)
void npk_sram_get(npk_chip *c, npk_event *e, uint32_t *out) { ring_op(c, e, out, 0); }
void npk_sram_put(npk_chip *c, npk_event *e, uint32_t *out) { ring_op(c, e, out, 1); }
void npk_sram_journal(npk_chip *c, npk_event *e, uint32_t *out) { ring_op(c, e, out, 2); }

void npk_sram_fast_journal(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)c; (void)e; (void)out;   /* not modelled: nothing is written */
}

void npk_sram_dequeue(npk_chip *c, npk_event *e, uint32_t *out)
{
    uint32_t a = e->addr & ~3u;
    uint32_t head = srd(c, a), count = srd(c, a + 8);
    if (count && head) {
        uint32_t next = srd(c, head);
        swr(c, a, next);
        swr(c, a + 8, count - 1);
        if (count == 1) { swr(c, a, 0); swr(c, a + 4, 0); }
        out[0] = head;
    }
    e->count = 1;
}

/* enqueue / enqueue_tail: queue descriptor in addr, buffer pointer in aux */
void npk_sram_enqueue(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)out;
    uint32_t a = e->addr & ~3u, buf = e->aux & ~3u;
    uint32_t tail = srd(c, a + 4), count = srd(c, a + 8);
    swr(c, buf, 0);
    if (count == 0) swr(c, a, buf);
    else swr(c, tail, buf);
    swr(c, a + 4, buf);
    swr(c, a + 8, count + 1);
}

/* csr_rd / csr_wr: SRAM controller CSRs are not modelled (reads give 0) */
void npk_sram_csr_rd(npk_chip *c, npk_event *e, uint32_t *out) { (void)c; (void)out; e->count = 1; }
void npk_sram_csr_wr(npk_chip *c, npk_event *e, uint32_t *out) { (void)c; (void)e; (void)out; }

/* the descriptor already lives in SRAM: nothing to write back */
void npk_sram_wr_qdesc(npk_chip *c, npk_event *e, uint32_t *out) { (void)c; (void)e; (void)out; }

void npk_sram_rd_qdesc(npk_chip *c, npk_event *e, uint32_t *out)
{
    uint32_t a = e->addr & ~3u;
    for (uint32_t i = 0; i < e->count && i < 3; i++) out[i] = srd(c, a + 4 * i);
    if (e->op == NPK_CMD_SRAM_RD_QDESC_OTHER) e->count = 1;
}
