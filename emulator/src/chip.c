/* Chip object: creation, run loop, debugger hooks, register/memory access,
 * statistics. */
#define _GNU_SOURCE  /* memfd_create: the memories live in shareable memfd mappings */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string.h>
#include <stdio.h>
#include "internal.h"

static void seterr(npk_chip *c, const char *msg)
{
    if (c) snprintf(c->err, sizeof c->err, "%s", msg);
}

const char *npk_last_error(npk_chip *c) { return c ? c->err : "no chip"; }

uint64_t npk_prng_next(uint64_t *s)
{
    /* xorshift64*: deterministic, seeded from the config */
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return (x * 0x2545F4914F6CDD1Dull) >> 32;
}

/* SRAM, DRAM and scratch live in page-aligned shared mappings of memfds, so
 * that an XScale core (Unicorn's mem_map_ptr) or a separate host process (the
 * gpe placement, mmap of the fd) can map them without copies.  Anonymous
 * memory when memfd is unavailable (fd -1). */
#define NPK_PAGE 4096u

static size_t page_round(uint64_t n) { return (size_t)((n + NPK_PAGE - 1) & ~(uint64_t)(NPK_PAGE - 1)); }

static uint8_t *shared_alloc(uint64_t bytes, int *fd, size_t *len)
{
    size_t n = page_round(bytes ? bytes : 1);
    int f = memfd_create("npk-mem", MFD_CLOEXEC);
    if (f >= 0 && ftruncate(f, (off_t)n) != 0) { close(f); f = -1; }
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, f >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, f, 0);
    if (p == MAP_FAILED) { if (f >= 0) close(f); return NULL; }
    *fd = f;
    *len = n;
    return p;
}

static void shared_free(uint8_t *p, int fd, size_t len)
{
    if (p) munmap(p, len);
    if (fd >= 0) close(fd);
}

static int cfg_valid(const npk_config *k)
{
    if (k->num_me < 1 || k->num_me > NPK_MAX_ME) return 0;
    if (k->ctx_per_me != 8) return 0;
    if (k->ustore_words < 1 || k->ustore_words > 8192) return 0;
    if (k->lm_words > 1024 || k->cam_entries < 1 || k->cam_entries > 16) return 0;
    if (k->sram.channels < 1 || k->sram.channels > 4) return 0;
    if (k->dram.channels < 1 || k->dram.channels > 4) return 0;
    if (k->scratch_bytes < 4 || k->scratch_rings > 16) return 0;
    if (k->sram_channel_bytes > (1ull << 30) || k->dram_bytes > (1ull << 32)) return 0;
    if (k->timestamp_shift > 16) return 0;
    if (k->me_per_cluster > 8 || (k->me_per_cluster & (k->me_per_cluster - 1))) return 0;
    if (k->me_per_cluster && k->num_me > 2 * k->me_per_cluster) return 0;
    if (k->tcam.present) {   /* (docs/tcam.md; config_schema.py says which field is wrong) */
        const npk_tcam_cfg *t = &k->tcam;
        if (t->channel >= k->sram.channels || t->window % NPK_TCAM_WINDOW_BYTES) return 0;
        if ((uint64_t)t->window + NPK_TCAM_WINDOW_BYTES > k->sram_channel_bytes) return 0;
        if (t->entries < 1 || t->entries > 8192) return 0;
        if (t->key_bits != 72 && t->key_bits != 144 && t->key_bits != 288) return 0;
        if (t->result_bits != 32 && t->result_bits != 64) return 0;
    }
    return 1;
}

/* two clusters; 0 in the config: half of num_me rounded up to a power of two */
static uint32_t default_per_cluster(uint32_t num_me)
{
    uint32_t k = 1;
    while (2 * k < num_me) k *= 2;
    return k;
}

int npk_me_number(npk_chip *c, int me)
{
    if (!c || me < 0 || (uint32_t)me >= c->cfg.num_me) return NPK_EINVAL;
    return (int)npk_me_hw(c, me);
}

int npk_me_index(npk_chip *c, int number)
{
    if (!c || number < 0) return NPK_EINVAL;
    int i = npk_me_flat(c, (uint32_t)number);
    return i < 0 ? NPK_EINVAL : i;
}

static void me_reset(npk_chip *c, npk_me *m)
{
    uint64_t *us = m->ustore;
    npk_uop *uop = m->uop;
    uint32_t *lm = m->lm;
    int idx = m->idx, mode = m->ctx_mode ? m->ctx_mode : 8;
    memset(m, 0, sizeof *m);
    m->ustore = us;
    m->uop = uop;
    m->lm = lm;
    memset(lm, 0, sizeof(uint32_t) * 1024);
    m->idx = idx;
    npk_set_ctx_mode(m, mode);
    m->cur = -1;
    m->status = NPK_ME_IDLE;
    npk_me_set_next(c, m, NPK_NEVER);
    m->idle_since = 0;
    npk_me_set_pend(c, m, NPK_NEVER);
    m->prng = c->cfg.seed * 0x9E3779B97F4A7C15ull + (uint64_t)idx * 0xBF58476D1CE4E5B9ull + 1;
    npk_cam_reset(m);
    for (int i = 0; i < NPK_NCTX; i++) m->ctx[i].swap_target = UINT32_MAX;
    m->stop.state = NPK_ME_IDLE;
    snprintf(m->stop.reason, sizeof m->stop.reason, "no context enabled");
}

static void reset_state(npk_chip *c, int clear_memories);

/* the calendar of due MEs anew from due[], its window starting at c->now */
static void cal_rebuild(npk_chip *c)
{
    memset(c->cal, 0, sizeof c->cal);
    c->cal_bits = 0;
    c->cal_far = c->cal_late = 0;
    c->cal_far_min = NPK_NEVER;
    c->cal_base = c->now;
    for (uint32_t i = 0; i < NPK_MAX_ME; i++) npk_cal_mark(c, i, c->due[i], 1);
}

/* the window moves on to start at t: MEs due in the cycles it now covers leave cal_far */
static void cal_advance(npk_chip *c, uint64_t t)
{
    if (t <= c->cal_base) return;
    /* nothing is due in [cal_base, t): t is the earliest cycle anything is */
    c->cal_base = t;
    if (c->cal_far_min - t >= NPK_CAL && c->cal_far_min >= t) return;
    uint64_t fmin = NPK_NEVER;
    for (uint32_t far = c->cal_far; far; far &= far - 1) {
        uint32_t i = (uint32_t)__builtin_ctz(far);
        uint64_t d = c->due[i];
        if (d - t < NPK_CAL) {
            c->cal_far &= ~(1u << i);
            npk_cal_mark(c, i, d, 1);
        } else if (d < fmin) {
            fmin = d;
        }
    }
    c->cal_far_min = fmin;
}

/* the earliest cycle an ME is due (NPK_NEVER: none) and the MEs due then, by a scan of due[] */
static uint64_t due_scan(const npk_chip *c, uint32_t *due)
{
    uint64_t t = NPK_NEVER;
    *due = 0;
    for (uint32_t i = 0; i < NPK_MAX_ME; i++) {
        if (c->due[i] < t) { t = c->due[i]; *due = 0; }
        if (c->due[i] == t && t != NPK_NEVER) *due |= 1u << i;
    }
    return t;
}

/* the same from the calendar */
static uint64_t cal_first(const npk_chip *c, uint32_t *due)
{
    uint64_t t = NPK_NEVER;
    *due = 0;
    if (!c->cal_late && !c->cal_bits && c->cal_far_min == NPK_NEVER) return t;   /* none due, ever */
    if (c->cal_late || (!c->cal_bits && c->cal_far)) return due_scan(c, due);   /* outside the window */
    if (!c->cal_bits) return t;
    uint32_t b = (uint32_t)c->cal_base & (NPK_CAL - 1);
    uint64_t r = b ? (c->cal_bits >> b) | (c->cal_bits << (NPK_CAL - b)) : c->cal_bits;
    uint32_t k = (uint32_t)__builtin_ctzll(r);
    *due = c->cal[(b + k) & (NPK_CAL - 1)];
    return c->cal_base + k;
}

#ifdef NPK_CHECK_CALENDAR
/* the sanitizer and fuzzer builds: the calendar against a scan of due[], every iteration */
static void cal_check(const npk_chip *c, uint64_t t, uint32_t due)
{
    uint32_t sdue;
    uint64_t st = due_scan(c, &sdue);
    if (st != t || sdue != due) {
        fprintf(stderr, "npk: calendar says cycle %llu MEs 0x%x, due[] says cycle %llu MEs 0x%x\n",
                (unsigned long long)t, due, (unsigned long long)st, sdue);
        abort();
    }
}
#else
static inline void cal_check(const npk_chip *c, uint64_t t, uint32_t due) { (void)c; (void)t; (void)due; }
#endif

void npk_reset(npk_chip *c)
{
    if (c) reset_state(c, 1);
}

static void reset_state(npk_chip *c, int clear_memories)
{
    c->now = 0;
    c->seq = 0;
    for (uint32_t i = 0; i < NPK_MAX_ME; i++) c->due[i] = NPK_NEVER;   /* MEs the chip lacks: never */
    cal_rebuild(c);
    for (uint32_t i = 0; i < c->cfg.num_me; i++) me_reset(c, &c->me[i]);
    if (clear_memories) {
        memset(c->sram, 0, (size_t)(c->cfg.sram_channel_bytes * c->cfg.sram.channels));
        memset(c->dram, 0, (size_t)c->cfg.dram_bytes);
    }
    memset(c->scratch, 0, c->cfg.scratch_bytes);
    memset(c->rings, 0, sizeof c->rings);
    memset(c->cap_csr, 0, NPK_CAP_CSR_WORDS * sizeof(uint32_t));
    memset(c->chan, 0, sizeof c->chan);
    memset(c->msf_buf, 0, NPK_MSF_STUB_BYTES);
    memset(c->msf_counts, 0, sizeof c->msf_counts);
    memset(c->fault_count, 0, sizeof c->fault_count);
    c->fault_head = c->fault_len = 0;
    c->guard_len = 0;
    c->cur_ev = NULL;
    c->irq = 0;
    npk_ev_reset(c);
    c->stop_req = 0;
    memset(&c->stop, 0, sizeof c->stop);
    c->step_me = -1;
    c->hist_head = c->hist_len = 0;
    c->hist_dropped = 0;
    c->hist_hash = 0xcbf29ce484222325ull;
    if (c->prof) memset(c->prof, 0, npk_profile_bytes(c));
    npk_tcam_reset(c);
}

static uint32_t log2_exact(uint32_t v)  /* 32: not a power of two */
{
    return v && !(v & (v - 1)) ? (uint32_t)__builtin_ctz(v) : 32;
}

/* constants the hot paths use instead of dividing by config values */
static void precompute(npk_chip *c)
{
    const npk_unit_cfg **u = c->unit_cfg;
    u[NPK_UNIT_SRAM] = &c->cfg.sram;
    u[NPK_UNIT_DRAM] = &c->cfg.dram;
    u[NPK_UNIT_SCRATCH] = &c->cfg.scratch;
    u[NPK_UNIT_HASH] = &c->cfg.hash;
    u[NPK_UNIT_CAP] = &c->cfg.cap;
    u[NPK_UNIT_MSF] = &c->cfg.msf;
    u[NPK_UNIT_PCI] = &c->cfg.pci;
    for (int k = 0; k < NPK_UNIT_COUNT; k++)
        c->unit_shift[k] = (uint8_t)log2_exact(u[k]->unit_bytes ? u[k]->unit_bytes : 4);
    c->dram_chans = c->cfg.dram.channels ? c->cfg.dram.channels : 1;
    c->dram_il = c->cfg.dram_interleave ? c->cfg.dram_interleave : 128;
    c->dram_il_shift = log2_exact(c->dram_il);
    uint32_t sram_chans = c->cfg.sram.channels ? c->cfg.sram.channels : 1;
    for (uint32_t i = 0; i < 4; i++) c->sram_chan_of[i] = (uint8_t)(i % sram_chans);
    c->dram_chans_m = npk_fastmod_m(c->dram_chans);
    if (c->cfg.tcam.present) {
        const npk_tcam_cfg *t = &c->cfg.tcam;
        c->tcam_lo = t->channel << 30 | (t->window + NPK_TCAM_RESULT_OFF);
        c->tcam_len = NPK_TCAM_SLOTS * 16;
        c->tcam_off = (uint64_t)t->channel * c->cfg.sram_channel_bytes + t->window;
    }
}

npk_chip *npk_create(const npk_config *cfg)
{
    if (!cfg || !cfg_valid(cfg)) return NULL;
    /* (cache-line aligned: the contexts' state is a line each) */
    npk_chip *c = aligned_alloc(_Alignof(npk_chip), sizeof *c);
    if (!c) return NULL;
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    if (!c->cfg.me_per_cluster) c->cfg.me_per_cluster = default_per_cluster(cfg->num_me);
    for (int i = 0; i < 3; i++) c->mem_fd[i] = -1;
    c->sram = shared_alloc((uint64_t)cfg->sram_channel_bytes * cfg->sram.channels + 4, &c->mem_fd[NPK_MEM_SRAM], &c->mem_len[NPK_MEM_SRAM]);
    c->dram = shared_alloc((uint64_t)cfg->dram_bytes + 8, &c->mem_fd[NPK_MEM_DRAM], &c->mem_len[NPK_MEM_DRAM]);
    c->scratch = shared_alloc((uint64_t)cfg->scratch_bytes + 4, &c->mem_fd[NPK_MEM_SCRATCH], &c->mem_len[NPK_MEM_SCRATCH]);
    c->cap_csr = calloc(NPK_CAP_CSR_WORDS, sizeof(uint32_t));
    c->msf_buf = calloc(NPK_MSF_STUB_BYTES, 1);
    c->hist_cap = cfg->history_capacity;
    c->hist = c->hist_cap ? calloc(c->hist_cap, sizeof(npk_hist_event)) : NULL;
    int ok = c->sram && c->dram && c->scratch && c->cap_csr && c->msf_buf && (!c->hist_cap || c->hist);
    /* the pre-decoded control stores, one block: ME i's words start i * (ustore_words + 1)
     * entries in, so that the words every ME runs (often the same addresses) do not all
     * fall into the same cache sets, as separately mapped blocks would */
    size_t per_me = (size_t)cfg->ustore_words + 1;   /* + a PC past the end */
    c->uops = calloc(per_me * cfg->num_me, sizeof(npk_uop));
    ok = ok && c->uops;
    for (uint32_t i = 0; ok && i < cfg->num_me; i++) {
        c->me[i].idx = (int)i;
        npk_set_ctx_mode(&c->me[i], 8);
        c->me[i].ustore = calloc(cfg->ustore_words, sizeof(uint64_t));
        c->me[i].lm = calloc(1024, sizeof(uint32_t));
        c->me[i].uop = c->uops + i * per_me;
        if (!c->me[i].ustore || !c->me[i].lm) ok = 0;
    }
    if (!ok) { npk_destroy(c); return NULL; }
    npk_msf_stub_init(c);
    precompute(c);
    reset_state(c, 0);  /* calloc'd memories are already zero */
    return c;
}

void npk_destroy(npk_chip *c)
{
    if (!c) return;
    for (int i = 0; i < NPK_MAX_ME; i++) { free(c->me[i].ustore); free(c->me[i].lm); }
    free(c->uops);
    shared_free(c->sram, c->mem_fd[NPK_MEM_SRAM], c->mem_len[NPK_MEM_SRAM]);
    shared_free(c->dram, c->mem_fd[NPK_MEM_DRAM], c->mem_len[NPK_MEM_DRAM]);
    shared_free(c->scratch, c->mem_fd[NPK_MEM_SCRATCH], c->mem_len[NPK_MEM_SCRATCH]);
    free(c->cap_csr); free(c->msf_buf);
    free(c->hist);
    free(c->prof);
    npk_ev_free_all(c);
    free(c);
}

int npk_get_config(npk_chip *c, npk_config *out)
{
    if (!c || !out) return NPK_EINVAL;
    *out = c->cfg;
    return NPK_OK;
}

static int bad_me(npk_chip *c, int me)
{
    return !c || me < 0 || (uint32_t)me >= c->cfg.num_me;
}

/* ME m's own block of pre-decoded words (npk_create) */
static npk_uop *own_uops(const npk_chip *c, const npk_me *m)
{
    return c->uops + (size_t)m->idx * (c->cfg.ustore_words + 1);
}

/* Before m's words change: the MEs that share m's pre-decoded words get copies of their
 * own, and m, if it shares another's, a copy of its own (see npk_load_ustore) */
static void unshare_uops(npk_chip *c, npk_me *m)
{
    size_t bytes = (c->cfg.ustore_words + 1) * sizeof(npk_uop);
    npk_uop *own = own_uops(c, m);
    for (uint32_t k = 0; k < c->cfg.num_me; k++) {
        npk_me *o = &c->me[k];
        if (o != m && o->uop == own) {
            memcpy(own_uops(c, o), own, bytes);
            o->uop = own_uops(c, o);
        }
    }
    if (m->uop != own) {
        memcpy(own, m->uop, bytes);
        m->uop = own;
    }
}

/* the count of words that signal a neighbour (cross_me_lookahead), for word w of m's
 * control store in or out (`add`); one written while running counts from now on */
static void count_neighbour_word(npk_chip *c, uint64_t w, int add)
{
    if (!npk_word_signals_neighbour(w)) return;
    if (!add) {
        c->nbr_sig_words--;
        return;
    }
    c->nbr_sig_words++;
    if (c->lookahead > npk_nbr_sig_lookahead(c)) c->lookahead = npk_nbr_sig_lookahead(c);
}

void npk_me_store_word(npk_chip *c, npk_me *m, uint32_t addr, uint64_t w)
{
    unshare_uops(c, m);
    count_neighbour_word(c, m->ustore[addr], 0);
    m->ustore[addr] = w;
    count_neighbour_word(c, w, 1);
    npk_predecode_word(c, &m->uop[addr], w, m->ctx_mode);
}

/* Loading a control store decodes its words, unless another ME has the same words in the
 * same context mode (the parallel layout's pool, the benchmarks): then m uses that ME's
 * pre-decoded words, one copy for both in the host's caches.  A word written later
 * (npk_me_store_word) or another load gives the MEs their own copies again. */
int npk_load_ustore(npk_chip *c, int me, const uint64_t *words, size_t n, int ctx_mode)
{
    if (bad_me(c, me)) return NPK_EINVAL;
    if (ctx_mode != 4 && ctx_mode != 8) { seterr(c, "ctx_mode must be 4 or 8"); return NPK_EINVAL; }
    if (n > c->cfg.ustore_words) { seterr(c, "image larger than the control store"); return NPK_ERANGE; }
    if (n && !words) return NPK_EINVAL;
    npk_me *m = &c->me[me];
    uint32_t nw = c->cfg.ustore_words;
    unshare_uops(c, m);
    for (uint32_t i = 0; i < nw; i++) count_neighbour_word(c, m->ustore[i], 0);
    memset(m->ustore, 0, nw * sizeof(uint64_t));
    for (size_t i = 0; i < n; i++) m->ustore[i] = words[i] & NPK_WORD_MASK;
    for (uint32_t i = 0; i < nw; i++) count_neighbour_word(c, m->ustore[i], 1);
    npk_set_ctx_mode(m, ctx_mode);   /* (before the words: a command's registers depend on it) */
    c->ustore_loaded |= 1u << me;
    for (uint32_t k = 0; k < c->cfg.num_me; k++) {
        npk_me *o = &c->me[k];
        if (o != m && ((c->ustore_loaded >> k) & 1) && o->uop == own_uops(c, o) && o->ctx_mode == ctx_mode &&
            !memcmp(o->ustore, m->ustore, nw * sizeof(uint64_t))) {
            m->uop = o->uop;
            return NPK_OK;
        }
    }
    for (uint32_t i = 0; i < nw; i++) npk_predecode_word(c, &m->uop[i], m->ustore[i], ctx_mode);
    return NPK_OK;
}

int npk_me_enable(npk_chip *c, int me, uint32_t mask)
{
    if (bad_me(c, me) || mask > 0xFF) return NPK_EINVAL;
    npk_me *m = &c->me[me];
    if (m->ctx_mode == 4) mask &= 0x55;
    m->ctx_enables = (m->ctx_enables & ~0xFF00u) | (mask << 8);
    if (mask && m->status != NPK_ME_RUNNING) {
        m->status = NPK_ME_RUNNING;
        m->stop.state = NPK_ME_RUNNING;
        m->stop.reason[0] = 0;
    }
    for (int i = 0; i < 8; i++) {
        npk_ctx *x = &m->ctx[i];
        if (mask & (1u << i)) {
            if (x->state == NPK_CTX_INACTIVE) npk_ctx_set_state(c, m, i, NPK_CTX_READY);
        } else if (x->state != NPK_CTX_INACTIVE) {
            if (m->cur == i) m->cur = -1;
            npk_ctx_set_state(c, m, i, NPK_CTX_INACTIVE);
        }
    }
    if (m->cur < 0 && mask) {
        m->ctx_arb_cntl = 7;  /* so that round robin starts at context 0 */
        npk_me_pick(c, m, c->now);
        /* the first context starts without a swap penalty */
        if (m->cur >= 0) {
            npk_me_set_next(c, m, c->now);
            m->st.stalled_cycles -= c->cfg.ctx_swap_cost;
            m->st.ctx_swaps--;
        }
    }
    if (!mask) {
        m->status = NPK_ME_IDLE;
        npk_me_set_next(c, m, NPK_NEVER);
    }
    return NPK_OK;
}

int npk_set_signal(npk_chip *c, int me, int ctx, int sig)
{
    if (bad_me(c, me) || ctx < -1 || ctx > 7 || sig < 1 || sig > 15) return NPK_EINVAL;
    for (int i = 0; i < 8; i++)
        if (ctx < 0 || ctx == i) npk_ctx_signal(c, &c->me[me], i, (uint16_t)(1u << sig));
    return NPK_OK;
}

int npk_me_status(npk_chip *c, int me, npk_me_info *out)
{
    if (bad_me(c, me) || !out) return NPK_EINVAL;
    *out = c->me[me].stop;
    out->state = c->me[me].status;
    return NPK_OK;
}

uint64_t npk_cycle(npk_chip *c) { return c ? c->now : 0; }

int npk_last_stop(npk_chip *c, npk_stop_info *out)
{
    if (!c || !out) return NPK_EINVAL;
    *out = c->stop;
    return NPK_OK;
}

/* ---- run loop -------------------------------------------------------------- */

static int any_alive(npk_chip *c)
{
    for (uint32_t i = 0; i < c->cfg.num_me; i++) {
        npk_me *m = &c->me[i];
        if (m->status != NPK_ME_RUNNING) continue;
        for (int k = 0; k < 8; k++)
            if (m->ctx[k].state != NPK_CTX_INACTIVE) return 1;
    }
    return 0;
}

/* The fewest cycles from an ME's word to its effect on another ME's contexts: a unit
 * command completes (signals, pushed transfer registers) cmd_overhead + its latency on
 * at the soonest; a NEXT/PREV_NEIGHBOR_SIGNAL write, where the control stores have one,
 * csr_write_to_use on (npk_nbr_sig_lookahead).  (The MSF device's own events bound the
 * run-ahead separately.) */
static uint64_t cross_me_lookahead(const npk_chip *c)
{
    uint64_t l = NPK_NEVER;
    for (int unit = 0; unit < NPK_UNIT_COUNT; unit++) {
        const npk_unit_cfg *u = npk_unit_cfg_of(c, unit);
        uint64_t t = (uint64_t)u->cmd_overhead + (u->read_latency < u->write_latency ? u->read_latency : u->write_latency);
        if (t < l) l = t;
    }
    if (c->nbr_sig_words && npk_nbr_sig_lookahead(c) < l) l = npk_nbr_sig_lookahead(c);
    return l;
}

int npk_run(npk_chip *c, uint64_t max_cycles, int *stop_reason)
{
    if (!c) return NPK_EINVAL;
    uint64_t end = c->now + max_cycles;
    if (end < c->now) end = NPK_NEVER - 1;
    uint32_t nme = c->cfg.num_me;
    int reason = NPK_STOP_BUDGET;
    c->stop_req = 0;
    /* run-ahead keeps results identical but reorders history records and
     * debugger stops, so it is off while those are in use */
    int ahead_ok = !c->hist_level && !c->nbp && !c->nwp_reg && !c->nwp_mem && c->step_me < 0 && !c->prof;
    c->fast_ok = !c->nbp && !c->nwp_reg && c->hist_level < 2 && !c->prof;
    cal_rebuild(c);   /* due[] may have changed between runs (npk_me_enable, npk_reset, ...) */
    c->lookahead = cross_me_lookahead(c);
    c->run_end = end;
    /* (the MSF device's hooks are not changed while a run is on) */
    uint64_t (*const msf_next_event)(void *) = c->msf.next_event;
    void (*const msf_advance)(void *, npk_chip *, uint64_t) = c->msf.advance;
    int wake_mode = !ahead_ok ? WAKE_OFF : msf_next_event || msf_advance ? WAKE_AFTER : WAKE_NOW;
    c->msf_next = NPK_NEVER;   /* (without a device, for the whole run) */
    for (;;) {
        /* the next cycle anything happens, and the MEs due then */
        uint32_t due;
        uint64_t t = cal_first(c, &due), tev = npk_ev_next_cycle(c);
        cal_check(c, t, due);
        if (tev < t) { t = tev; due = 0; }
        uint64_t msf_next = NPK_NEVER;
        if (msf_next_event) {
            uint64_t tm = msf_next_event(c->msf.user);
            msf_next = tm < c->now ? c->now : tm;
            if (msf_next < t) { t = msf_next; due = 0; }
            c->msf_next = msf_next;
        }
        if (t >= end) {   /* (NPK_NEVER too) */
            if (t == NPK_NEVER && !any_alive(c)) {
                /* the run ends with the last stop: after a halt's cycle (the halt is an
                 * instruction, counted as executed), at a bad PC's or an illegal word's
                 * (nothing executed then); an ME that stopped while running ahead stopped
                 * after the last cycle processed here */
                for (uint32_t i = 0; i < nme; i++) {
                    const npk_me *m = &c->me[i];
                    uint64_t last = m->stop.cycle + (m->status == NPK_ME_HALT);
                    if (m->status != NPK_ME_RUNNING && m->status != NPK_ME_IDLE && last > c->now) c->now = last;
                }
                reason = NPK_STOP_HALTED;
                break;
            }
            if (t == NPK_NEVER && c->step_me >= 0) break;  /* stepping a context that can never run */
            c->now = end;
            break;
        }
        c->now = t;
        c->due_now = 0;
        cal_advance(c, t);
        npk_ev_advance(c, t);
        /* a device that names its next event is advanced when that comes; one that does
         * not, on every step of the loop */
        c->wake_ahead = wake_mode;
        if (msf_advance && (msf_next <= t || !msf_next_event)) msf_advance(c->msf.user, c, t);
        while (npk_ev_next_cycle(c) <= t) {
            npk_event *ev = npk_ev_pop(c);
            if (ev->kind == EVK_MEM) { if (!npk_complete_plain_read(c, ev)) npk_unit_complete(c, ev); }
            else if (ev->kind == EVK_SIGNAL) npk_ctx_signal(c, &c->me[ev->me], ev->ctx, ev->sigmask);
            else npk_tcam_complete(c, ev);
            npk_ev_free(c, ev);
        }
        c->wake_ahead = 0;
        if (msf_next_event && msf_next <= t) {
            /* the device's events at t are done (and completions may have added some):
             * its next one bounds the run-ahead, not the one just handled.  Only the
             * device and completions change it, never an ME's turn. */
            uint64_t tm = msf_next_event(c->msf.user);
            msf_next = tm < c->now ? c->now : tm;
            c->msf_next = msf_next;
        }
        /* contexts woken now on idle MEs run their first local words (run-ahead) */
        if (c->woke) {
            uint64_t horizon = npk_ev_next_cycle(c);
            if (horizon > end) horizon = end;
            if (msf_next < horizon) horizon = msf_next;
            for (uint32_t w = c->woke; w; w &= w - 1) npk_me_run_woken(c, &c->me[__builtin_ctz(w)], horizon, end);
            c->woke = 0;
        }
        /* the MEs due now, in index order; one that becomes due now while they run
         * (a wake-up without a swap cost) runs too if its turn is still to come */
        if (c->due_now) {
            c->due_now = 0;
            for (uint32_t i = 0; i < nme; i++)
                due |= (uint32_t)(c->due[i] <= t) << i;
        }
        while (due) {
            uint32_t i = (uint32_t)__builtin_ctz(due);
            due &= due - 1;
            npk_me *m = &c->me[i];
            if (m->pend_min <= t) npk_me_apply_csrs(c, m);
            if (m->next != t) goto next_me;
            int cur = m->cur;
            /* run ahead through local words up to the next completion */
            uint64_t horizon = npk_ev_next_cycle(c);
            if (horizon > end) horizon = end;
            if (msf_next < horizon) horizon = msf_next;
            npk_me_advance(c, m, horizon, end, ahead_ok);
            if (c->step_me == (int)i && cur == c->step_ctx && !c->stop_req) {
                c->stop_req = 1;
                c->stop.reason = NPK_STOP_STEP;
                c->stop.me = (int)i;
                c->stop.ctx = cur;
                c->stop.pc = m->ctx[cur].pc;
                c->stop.cycle = t;
            }
        next_me:
            if (c->due_now) {
                c->due_now = 0;
                for (uint32_t j = i + 1; j < nme; j++)
                    due |= (uint32_t)(c->due[j] <= t) << j;
            }
        }
        if ((c->irq & c->irq_stop) && !c->stop_req) {
            c->stop_req = 1;
            c->stop.reason = NPK_STOP_IRQ;
            c->stop.me = -1;
            c->stop.cycle = t;
        }
        if (c->stop_req) {
            reason = c->stop.reason;
            /* a breakpoint stops before its instruction; others stop after */
            if (reason != NPK_STOP_BREAKPOINT) c->now = t + 1 > end ? end : t + 1;
            else c->now = t;
            for (uint32_t i = 0; i < nme; i++)
                if (c->me[i].next < c->now) npk_me_set_next(c, &c->me[i], c->now);
            break;
        }
    }
    c->stop.reason = reason;
    c->stop.cycle = c->now;
    if (stop_reason) *stop_reason = reason;
    return NPK_OK;
}

int npk_step(npk_chip *c, int me, int ctx)
{
    if (bad_me(c, me) || ctx < 0 || ctx > 7) return NPK_EINVAL;
    npk_ctx *x = &c->me[me].ctx[ctx];
    if (c->me[me].status != NPK_ME_RUNNING || x->state == NPK_CTX_INACTIVE) {
        seterr(c, "context is not enabled");
        return NPK_ESTATE;
    }
    c->step_me = me;
    c->step_ctx = ctx;
    int reason;
    npk_run(c, 1ull << 40, &reason);
    c->step_me = -1;
    return reason == NPK_STOP_STEP ? NPK_OK : NPK_ESTATE;
}

/* ---- breakpoints / watchpoints ------------------------------------------- */

int npk_bp_add(npk_chip *c, int me, int ctx, uint32_t pc)
{
    if (!c) return NPK_EINVAL;
    for (int i = 0; i < NPK_MAX_BP; i++) {
        if (!c->bp[i].used) {
            c->bp[i].used = 1;
            c->bp[i].me = me;
            c->bp[i].ctx = ctx;
            c->bp[i].pc = pc;
            c->nbp++;
            return i;
        }
    }
    return NPK_ENOMEM;
}

int npk_bp_del(npk_chip *c, int id)
{
    if (!c || id < 0 || id >= NPK_MAX_BP || !c->bp[id].used) return NPK_EINVAL;
    c->bp[id].used = 0;
    c->nbp--;
    return NPK_OK;
}

int npk_bp_resume_clear(npk_chip *c, int me)
{
    if (bad_me(c, me)) return NPK_EINVAL;
    int was = c->me[me].bp_skip;
    c->me[me].bp_skip = 0;
    return was;
}

int npk_wp_add_reg(npk_chip *c, int me, int kind, uint32_t index)
{
    if (!c) return NPK_EINVAL;
    for (int i = 0; i < NPK_MAX_WP; i++) {
        if (!c->wp[i].used) {
            c->wp[i] = (npk_wp){1, 0, me, kind, 0, 0, index, 0};
            c->nwp_reg++;
            return i;
        }
    }
    return NPK_ENOMEM;
}

int npk_wp_add_mem(npk_chip *c, int space, uint64_t addr, uint32_t len)
{
    if (!c || space < 0 || space > 2 || len == 0) return NPK_EINVAL;
    for (int i = 0; i < NPK_MAX_WP; i++) {
        if (!c->wp[i].used) {
            c->wp[i] = (npk_wp){1, 1, -1, 0, space, addr, 0, len};
            c->nwp_mem++;
            return i;
        }
    }
    return NPK_ENOMEM;
}

int npk_wp_del(npk_chip *c, int id)
{
    if (!c || id < 0 || id >= NPK_MAX_WP || !c->wp[id].used) return NPK_EINVAL;
    if (c->wp[id].is_mem) c->nwp_mem--; else c->nwp_reg--;
    c->wp[id].used = 0;
    return NPK_OK;
}

static void wp_fire(npk_chip *c, int id, int me, int ctx, uint32_t pc)
{
    if (c->stop_req) return;
    c->stop_req = 1;
    c->stop.reason = NPK_STOP_WATCHPOINT;
    c->stop.id = id;
    c->stop.me = me;
    c->stop.ctx = ctx;
    c->stop.pc = pc;
    c->stop.cycle = c->now;
}

void npk_reg_watch(npk_chip *c, int me, int kind, uint32_t index, uint32_t old, uint32_t val,
                   int wme, int wctx, uint32_t wpc)
{
    if (old == val) return;  /* a watchpoint reports changes, not rewrites of the same value */
    for (int i = 0; i < NPK_MAX_WP; i++) {
        npk_wp *w = &c->wp[i];
        if (w->used && !w->is_mem && w->kind == kind && w->index == index && (w->me < 0 || w->me == me)) {
            wp_fire(c, i, wme, wctx, wpc);
            return;
        }
    }
}

/* do [a, a + alen) and [b, b + blen) overlap (without wrapping around 2^64)? */
static int overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a <= b ? b - a < alen : a - b < blen;
}

void npk_mem_watch(npk_chip *c, int space, uint64_t addr, uint32_t len)
{
    for (int i = 0; i < NPK_MAX_WP; i++) {
        npk_wp *w = &c->wp[i];
        if (w->used && w->is_mem && w->space == space && overlap(addr, len, w->addr, w->len)) {
            wp_fire(c, i, -1, -1, 0);
            return;
        }
    }
}

/* ---- registers ------------------------------------------------------------- */

static int reg_access(npk_chip *c, int me, int ctx, int kind, uint32_t index, uint32_t *val, int write)
{
    if (bad_me(c, me)) return NPK_EINVAL;
    npk_me *m = &c->me[me];
    int per_ctx = kind >= NPK_REG_PC && kind <= NPK_REG_WAIT_MASK;
    if (per_ctx && (ctx < 0 || ctx > 7)) return NPK_EINVAL;
    uint32_t *p = NULL;
    switch (kind) {
    case NPK_REG_GPR_A: case NPK_REG_GPR_B:
        if (index > 127) return NPK_EINVAL;
        p = npk_gpr(m, kind, index);
        break;
    case NPK_REG_SXFER_IN: case NPK_REG_SXFER_OUT: case NPK_REG_DXFER_IN: case NPK_REG_DXFER_OUT:
        if (index > 127) return NPK_EINVAL;
        p = npk_xfer(m, kind - NPK_REG_SXFER_IN, index);
        break;
    case NPK_REG_NN:
        if (index > 127) return NPK_EINVAL;
        p = &m->nn[index];
        break;
    case NPK_REG_LM:
        if (index >= c->cfg.lm_words) return NPK_EINVAL;
        p = &m->lm[index];
        break;
    case NPK_REG_CAM_TAG:
        if (index >= c->cfg.cam_entries) return NPK_EINVAL;
        if (write) { m->cam_tag[index] = *val; m->cam_valid[index] = 1; return NPK_OK; }
        *val = m->cam_tag[index];
        return NPK_OK;
    case NPK_REG_CAM_STATE:
        if (index >= c->cfg.cam_entries) return NPK_EINVAL;
        if (write) m->cam_state[index] = (uint8_t)(*val & 0xF); else *val = m->cam_state[index];
        return NPK_OK;
    case NPK_REG_CSR:
        if (index > 0x3FC || (index & 3) || ctx < -1 || ctx > 7) return NPK_EINVAL;
        if (write) npk_lcsr_write(c, m, ctx < 0 ? 0 : ctx, index, *val);
        else if (index == NPK_LCSR_PSEUDO_RANDOM_NUMBER) {
            /* a look from outside (the debugger) takes no number from the generator: it
             * shows the one the ME's next read gets, and the program runs as without it */
            uint64_t peek = m->prng;
            *val = (uint32_t)npk_prng_next(&peek);
        } else *val = npk_lcsr_read(c, m, ctx < 0 ? 0 : ctx, index);
        return NPK_OK;
    case NPK_REG_PC:
        if (write) {
            if (*val >= c->cfg.ustore_words) return NPK_ERANGE;
            m->ctx[ctx].pc = *val;
            m->ctx[ctx].br_pending = 0;
        } else *val = m->ctx[ctx].pc;
        return NPK_OK;
    case NPK_REG_CC:
        if (write) m->ctx[ctx].cc = (uint8_t)(*val & 0xF); else *val = m->ctx[ctx].cc;
        return NPK_OK;
    case NPK_REG_SIGNALS:
        if (write) m->ctx[ctx].sig = (uint16_t)(*val & 0xFFFE); else *val = m->ctx[ctx].sig;
        return NPK_OK;
    case NPK_REG_CTX_STATE:
        if (write) return NPK_EINVAL;
        *val = m->ctx[ctx].state;
        return NPK_OK;
    case NPK_REG_WAIT_MASK:
        if (write) return NPK_EINVAL;
        *val = m->ctx[ctx].wait_mask;
        return NPK_OK;
    default:
        return NPK_EINVAL;
    }
    if (write) *p = *val; else *val = *p;
    return NPK_OK;
}

int npk_reg_read(npk_chip *c, int me, int ctx, int kind, uint32_t index, uint32_t *value)
{
    if (!value) return NPK_EINVAL;
    return reg_access(c, me, ctx, kind, index, value, 0);
}

int npk_reg_write(npk_chip *c, int me, int ctx, int kind, uint32_t index, uint32_t value)
{
    return reg_access(c, me, ctx, kind, index, &value, 1);
}

/* ---- memory ------------------------------------------------------------------- */

/* does [addr, addr + n) lie inside a memory of `size` bytes?  (no sum that could wrap) */
static int in_range(uint64_t addr, uint64_t n, uint64_t size)
{
    return n <= size && addr <= size - n;
}

static uint8_t *mem_ptr(npk_chip *c, int space, uint64_t addr, size_t n)
{
    switch (space) {
    case NPK_MEM_SRAM: {
        uint64_t ch = addr >> 30, off = addr & 0x3FFFFFFFu;
        if (ch >= c->cfg.sram.channels || !in_range(off, n, c->cfg.sram_channel_bytes)) return NULL;
        return c->sram + ch * c->cfg.sram_channel_bytes + off;
    }
    case NPK_MEM_DRAM:
        return in_range(addr, n, c->cfg.dram_bytes) ? c->dram + addr : NULL;
    case NPK_MEM_SCRATCH:
        return in_range(addr, n, c->cfg.scratch_bytes) ? c->scratch + addr : NULL;
    default:
        return NULL;
    }
}

int npk_mem_read(npk_chip *c, int space, uint64_t addr, void *buf, size_t n)
{
    if (!c || (!buf && n)) return NPK_EINVAL;
    uint8_t *p = mem_ptr(c, space, addr, n);
    if (!p) { seterr(c, "address range outside the memory"); return NPK_ERANGE; }
    if (n) memcpy(buf, p, n);
    return NPK_OK;
}

int npk_mem_write(npk_chip *c, int space, uint64_t addr, const void *buf, size_t n)
{
    if (!c || (!buf && n)) return NPK_EINVAL;
    uint8_t *p = mem_ptr(c, space, addr, n);
    if (!p) { seterr(c, "address range outside the memory"); return NPK_ERANGE; }
    if (n) memcpy(p, buf, n);
    return NPK_OK;
}

int npk_scratch_ring_config(npk_chip *c, int ring, uint32_t base, uint32_t size, uint32_t margin)
{
    if (!c || ring < 0 || (uint32_t)ring >= c->cfg.scratch_rings) return NPK_EINVAL;
    if (size && ((uint64_t)base + 4ull * size > c->cfg.scratch_bytes || (base & 3))) return NPK_ERANGE;
    npk_ring *r = &c->rings[ring];
    r->base = base;
    r->size = size;
    r->margin = margin;
    r->head = r->tail = r->count = 0;
    return NPK_OK;
}

/* ---- faults ------------------------------------------------------------------ */

void npk_fault_at(npk_chip *c, int kind, int me, int ctx, uint32_t pc, uint64_t addr)
{
    c->fault_count[kind]++;
    uint32_t pos = (c->fault_head + c->fault_len) % NPK_FAULT_LOG;
    if (c->fault_len == NPK_FAULT_LOG) c->fault_head = (c->fault_head + 1) % NPK_FAULT_LOG;
    else c->fault_len++;
    c->fault_log[pos] = (npk_fault){c->now, addr, pc, me, ctx, kind};
}

void npk_fault_cmd(npk_chip *c, int kind, uint64_t addr)
{
    const npk_event *e = c->cur_ev;
    if (!e) { npk_fault_at(c, kind, -1, -1, 0, addr); return; }
    if (c->cur_faulted) return;
    c->cur_faulted = 1;
    npk_fault_at(c, kind, e->me, e->ctx, e->pc, addr);
}

uint64_t npk_fault_counts(npk_chip *c, uint64_t *counts, int n)
{
    if (!c) return 0;
    uint64_t total = 0;
    for (int k = 0; k < NPK_FAULT_KINDS; k++) {
        total += c->fault_count[k];
        if (counts && k < n) counts[k] = c->fault_count[k];
    }
    return total;
}

size_t npk_fault_log(npk_chip *c, npk_fault *buf, size_t max)
{
    if (!c || !buf) return 0;
    size_t n = c->fault_len < max ? c->fault_len : max;
    size_t skip = c->fault_len - n;  /* keep the most recent */
    for (size_t i = 0; i < n; i++) buf[i] = c->fault_log[(c->fault_head + skip + i) % NPK_FAULT_LOG];
    return n;
}

/* ---- guarded scratch words ----------------------------------------------------- */

int npk_scratch_guard(npk_chip *c, uint32_t base, uint32_t words, const uint8_t *allowed)
{
    if (!c || (base & 3) || words > NPK_GUARD_WORDS || (uint64_t)base + 4ull * words > c->cfg.scratch_bytes
        || (words && !allowed))
        return NPK_ERANGE;
    memset(c->guard_allowed, 0, sizeof c->guard_allowed);
    if (words) memcpy(c->guard_allowed, allowed, (words + 7) / 8);
    c->guard_base = base;
    c->guard_bytes = 4 * words;
    c->guard_len = 0;
    return NPK_OK;
}

void npk_guard_write(npk_chip *c, uint32_t addr)
{
    uint32_t k = (addr - c->guard_base) >> 2;
    if (c->guard_allowed[k >> 3] >> (k & 7) & 1) return;
    for (uint32_t i = 0; i < c->guard_len; i++) {
        if (c->guard_log[i].addr == addr) { c->guard_log[i].count++; return; }
    }
    if (c->guard_len == NPK_GUARD_LOG) return;
    const npk_event *e = c->cur_ev;
    c->guard_log[c->guard_len++] = (npk_guard_hit){c->now, 1, addr, e ? e->pc : 0, e ? e->me : -1, e ? e->ctx : -1};
}

size_t npk_guard_hits(npk_chip *c, npk_guard_hit *buf, size_t max)
{
    if (!c) return 0;
    for (size_t i = 0; i < c->guard_len && i < max; i++) buf[i] = c->guard_log[i];
    return c->guard_len;
}

int npk_scratch_ring_count(npk_chip *c, int ring, uint32_t *count)
{
    if (!c || !count || ring < 0 || ring >= 16) return NPK_EINVAL;
    *count = c->rings[ring].count;
    return NPK_OK;
}

int npk_scratch_ring_get(npk_chip *c, int ring, uint32_t *word)
{
    if (!c || !word || ring < 0 || (uint32_t)ring >= c->cfg.scratch_rings) return NPK_EINVAL;
    return npk_scr_ring_get1(c, ring, word);
}

int npk_scratch_ring_put(npk_chip *c, int ring, uint32_t word)
{
    if (!c || ring < 0 || (uint32_t)ring >= c->cfg.scratch_rings) return NPK_EINVAL;
    return npk_scr_ring_put1(c, ring, word);
}

int npk_cap_csr_read(npk_chip *c, uint32_t addr, uint32_t *value)
{
    if (!c || !value || addr > 0xFFFF) return NPK_EINVAL;
    *value = c->cap_csr[addr >> 2];
    return NPK_OK;
}

int npk_cap_csr_write(npk_chip *c, uint32_t addr, uint32_t value)
{
    if (!c || addr > 0xFFFF) return NPK_EINVAL;
    c->cap_csr[addr >> 2] = value;
    return NPK_OK;
}

int npk_xscale_irq_stop(npk_chip *c, uint32_t mask)
{
    if (!c) return NPK_EINVAL;
    c->irq_stop = mask;
    return NPK_OK;
}

int npk_mem_backing(npk_chip *c, int space, npk_backing *out)
{
    if (!c || !out || space < 0 || space > NPK_MEM_SCRATCH) return NPK_EINVAL;
    uint8_t *p = space == NPK_MEM_SRAM ? c->sram : space == NPK_MEM_DRAM ? c->dram : c->scratch;
    out->ptr = p;
    out->size = space == NPK_MEM_SRAM ? c->cfg.sram_channel_bytes * c->cfg.sram.channels
              : space == NPK_MEM_DRAM ? c->cfg.dram_bytes : c->cfg.scratch_bytes;
    out->mapped = c->mem_len[space];
    out->fd = c->mem_fd[space];
    return NPK_OK;
}

uint32_t npk_xscale_irq(npk_chip *c, int clear)
{
    if (!c) return 0;
    uint32_t v = c->irq;
    if (clear) c->irq = 0;
    return v;
}

/* ---- statistics ------------------------------------------------------------ */

int npk_stats_me(npk_chip *c, int me, npk_me_stats *out)
{
    if (bad_me(c, me) || !out) return NPK_EINVAL;
    npk_me *m = &c->me[me];
    *out = m->st;
    /* every instruction takes one executing cycle; the hot paths count them by context only */
    out->instructions = 0;
    for (int i = 0; i < 8; i++) {
        out->ctx_instructions[i] = m->ctx[i].instructions;
        out->ctx_sleep_cycles[i] = m->ctx[i].sleep_cycles;
        out->instructions += m->ctx[i].instructions;
    }
    out->executing_cycles = out->instructions;
    /* (idle from the cycle after a kill: the run may end before it) */
    if (m->cur < 0 && m->idle_since != NPK_NEVER && m->status == NPK_ME_RUNNING && c->now > m->idle_since)
        out->idle_cycles += c->now - m->idle_since;
    /* cycles charged ahead that the run has not reached (npk_me.over_stalled) */
    if (m->cur >= 0 && m->next != NPK_NEVER && m->next > c->now) {
        uint64_t *n = m->over_stalled ? &out->stalled_cycles : &out->aborted_cycles;
        uint64_t over = m->next - c->now;
        *n -= over < *n ? over : *n;
    }
    for (int i = 0; i < 8; i++) {
        npk_ctx *x = &m->ctx[i];
        uint64_t d = c->now > x->state_since ? c->now - x->state_since : 0;
        if (x->state == NPK_CTX_SLEEP) out->ctx_sleep_cycles[i] += d;
        else if (x->state == NPK_CTX_READY) out->ctx_ready_cycles[i] += d;
    }
    return NPK_OK;
}

int npk_unit_channels(npk_chip *c, int unit)
{
    if (!c || unit < 0 || unit >= NPK_UNIT_COUNT) return NPK_EINVAL;
    if (unit == NPK_UNIT_SRAM) return (int)c->cfg.sram.channels;
    if (unit == NPK_UNIT_DRAM) return (int)c->cfg.dram.channels;
    return 1;
}

int npk_stats_unit(npk_chip *c, int unit, int channel, npk_unit_stats *out)
{
    if (!c || !out || unit < 0 || unit >= NPK_UNIT_COUNT || channel < 0 || channel >= npk_unit_channels(c, unit))
        return NPK_EINVAL;
    npk_chan *ch = &c->chan[unit][channel];
    *out = ch->st;
    /* occupancy already booked beyond the current cycle is not yet busy time */
    uint64_t ahead = ch->busy_until > c->now ? ch->busy_until - c->now : 0;
    out->busy_cycles = out->busy_cycles > ahead ? out->busy_cycles - ahead : 0;
    return NPK_OK;
}
