/* Datapath: the CRC unit, the CAM, and the semantics of the ALU operations that are
 * instructions of their own (mev2.yaml mnemonics with an alu_op; the generated
 * NPK_ALU_OWN_OPS lists them): void npk_alu_<OP>(npk_exec *e, const npk_uop *u). */
#include "exec.h"

/* ---- CRC ------------------------------------------------------------------
 * crc_be processes the selected bytes most significant first with an
 * MSB-first (non-reflected) register; crc_le processes them least significant
 * first with the reflected algorithm.  bit_swap reverses the bits of each
 * byte before it enters the unit.  The remainder lives in CRC_REMAINDER. */

static uint32_t reflect(uint32_t v, int bits)
{
    uint32_t r = 0;
    for (int i = 0; i < bits; i++)
        if (v & (1u << i)) r |= 1u << (bits - 1 - i);
    return r;
}

static void crc_params(uint32_t type, uint32_t *poly, int *width)
{
    switch (type) {
    case NPK_CRC_TYPE_CRC_CCITT: *poly = 0x1021; *width = 16; break;
    case NPK_CRC_TYPE_CRC_32: *poly = 0x04C11DB7; *width = 32; break;
    case NPK_CRC_TYPE_CRC_ISCSI: *poly = 0x1EDC6F41; *width = 32; break;   /* Castagnoli */
    case NPK_CRC_TYPE_CRC_10: *poly = 0x233; *width = 10; break;
    case NPK_CRC_TYPE_CRC_5: *poly = 0x05; *width = 5; break;
    default: *poly = 0; *width = 0; break;
    }
}

/* bytes_sel (crc_bytes enum): which bytes of the operand enter the unit;
 * byte 0 = bits 31:24 (the first byte in network order) */
static void byte_range(uint32_t sel, int *first, int *last)
{
    switch (sel) {
    case NPK_CRC_BYTES_BYTES_0_3: *first = 0; *last = 3; break;
    case NPK_CRC_BYTES_BYTES_1_3: *first = 1; *last = 3; break;
    case NPK_CRC_BYTES_BYTES_2_3: *first = 2; *last = 3; break;
    case NPK_CRC_BYTES_BYTES_3: *first = 3; *last = 3; break;
    case NPK_CRC_BYTES_BYTES_0_2: *first = 0; *last = 2; break;
    case NPK_CRC_BYTES_BYTES_0_1: *first = 0; *last = 1; break;
    default: *first = 0; *last = 0; break;   /* NPK_CRC_BYTES_BYTES_0 */
    }
}

uint32_t npk_crc(npk_me *m, uint32_t type, uint32_t data, uint32_t bytes_sel, int le, int bit_swap)
{
    uint32_t poly;
    int width;
    crc_params(type, &poly, &width);
    if (!width) return m->crc_rem;
    int first, last;
    byte_range(bytes_sel, &first, &last);
    uint32_t wmask = width == 32 ? 0xFFFFFFFFu : ((1u << width) - 1);
    uint32_t rem = m->crc_rem & wmask;
    for (int k = first; k <= last; k++) {
        int bi = le ? 3 - k : k;   /* le: byte 3 (bits 7:0) first */
        uint32_t byte = (data >> (24 - 8 * bi)) & 0xFF;
        if (bit_swap) byte = reflect(byte, 8);
        if (!le) {
            for (int i = 7; i >= 0; i--) {
                uint32_t in = (byte >> i) & 1;
                uint32_t top = (rem >> (width - 1)) & 1;
                rem = (rem << 1) & wmask;
                if (top ^ in) rem ^= poly;
            }
        } else {
            uint32_t rpoly = reflect(poly, width);
            for (int i = 0; i < 8; i++) {
                uint32_t in = (byte >> i) & 1;
                uint32_t low = rem & 1;
                rem >>= 1;
                if (low ^ in) rem ^= rpoly;
            }
        }
    }
    m->crc_rem = (m->crc_rem & ~wmask) | rem;
    if (width == 32) m->crc_rem = rem;
    return m->crc_rem;
}

/* ---- CAM (HRM p.176: result in bits 11:3 = state[11:8], hit[7], entry[6:3];
 * a miss returns the LRU entry and state 0; lookups that miss do not change
 * the LRU order, cam_write and hits make the entry most recently used) */

void npk_cam_reset(npk_me *m)
{
    for (int i = 0; i < 16; i++) {
        m->cam_tag[i] = 0;
        m->cam_state[i] = 0;
        m->cam_valid[i] = 0;
        m->cam_lru[i] = (uint8_t)i;
    }
}

void npk_cam_touch(npk_me *m, int entry)
{
    int pos = 0;
    while (pos < 16 && m->cam_lru[pos] != entry) pos++;
    if (pos >= 16) return;
    for (int i = pos; i < 15; i++) m->cam_lru[i] = m->cam_lru[i + 1];
    m->cam_lru[15] = (uint8_t)entry;
}

uint32_t npk_cam_lookup(npk_me *m, uint32_t key, uint32_t entries)
{
    for (int i = 0; i < 16; i++) {
        if (m->cam_valid[i] && m->cam_tag[i] == key) {
            npk_cam_touch(m, i);
            return ((uint32_t)m->cam_state[i] << 8) | 0x80u | ((uint32_t)i << 3);
        }
    }
    /* a miss names the least recently used of the configured entries
     * (cam_lru orders all 16; entries beyond cam_entries are skipped) */
    for (int i = 0; i < 16; i++)
        if (m->cam_lru[i] < entries) return (uint32_t)m->cam_lru[i] << 3;
    return 0;
}

/* ---- ALU operations that are instructions of their own ---------------------------- */

void npk_alu_CAM_CLEAR(npk_exec *e, const npk_uop *u)
{
    (void)u;
    npk_cam_reset(e->m);
}

/* cam_write[entry, tag, state] / cam_write_state[entry, state]: the dest field holds the state */
static void cam_write(npk_exec *e, const npk_uop *u, int with_tag)
{
    npk_me *m = e->m;
    uint32_t entry = npk_rd(e, &u->b) & 15;
    if (entry >= e->c->cfg.cam_entries) entry %= e->c->cfg.cam_entries;
    if (with_tag) {
        m->cam_tag[entry] = npk_rd(e, &u->a);
        m->cam_valid[entry] = 1;
        npk_cam_touch(m, (int)entry);
    }
    m->cam_state[entry] = (uint8_t)(NPK_ALU_DEST(u->w) & 0xF);
}

void npk_alu_CAM_WRITE(npk_exec *e, const npk_uop *u) { cam_write(e, u, 1); }
void npk_alu_CAM_WRITE_STATE(npk_exec *e, const npk_uop *u) { cam_write(e, u, 0); }

void npk_alu_CRC(npk_exec *e, const npk_uop *u)
{
    uint64_t w = u->w;
    uint32_t ct = NPK_ALU_CRC_TYPE(w), nb = NPK_ALU_CRC_BYTES(w);
    if (!npk_crc_type_name(ct) || !npk_crc_bytes_name(nb)) { e->illegal = 1; return; }
    uint32_t src = npk_rd(e, &u->a);
    npk_crc(e->m, ct, src, nb, (int)NPK_ALU_CRC_LE(w), (int)NPK_ALU_CRC_BIT_SWAP(w));
    npk_wr(e, &u->d, src);
    npk_set_alu(e, src, 0, src);
}

void npk_alu_POP_COUNT1(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b;
    npk_alu_sources(e, u, &a, &b);
    e->m->popcnt = (uint32_t)__builtin_popcount(b);
}

void npk_alu_POP_COUNT2(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b;
    npk_alu_sources(e, u, &a, &b);
}

void npk_alu_POP_COUNT3(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b;
    npk_alu_sources(e, u, &a, &b);
    uint32_t r = (uint32_t)__builtin_popcount(b);
    npk_wr(e, &u->d, r);
    npk_set_alu(e, a, b, r);
    e->x->cc = npk_cc_logic(r);
}

/* the bit number of the least significant set bit of v; 0x80 (and Z) when none is set */
static void find_bset(npk_exec *e, const npk_uop *u, uint32_t a, uint32_t b, uint32_t v)
{
    uint32_t r = v ? (uint32_t)__builtin_ctz(v) : 0x80u;
    npk_wr(e, &u->d, r);
    npk_set_alu(e, a, b, r);
    e->x->cc = v ? 0 : F_Z;
}

void npk_alu_FIND_BSET(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b;
    npk_alu_sources(e, u, &a, &b);
    find_bset(e, u, a, b, b);
}

void npk_alu_FIND_BSET_WITH_MASK(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b;
    npk_alu_sources(e, u, &a, &b);
    find_bset(e, u, a, b, a & b);
}

/* cam_lookup[dest, key], lm_addr0|1[n]: the B operand carries the lm_addr token */
void npk_alu_CAM_LOOKUP(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b;
    npk_alu_sources(e, u, &a, &b);
    uint32_t r = npk_cam_lookup(e->m, a, e->c->cfg.cam_entries);
    npk_wr(e, &u->d, r);
    if (b & 1) *npk_lm_reg(e->m, e->ctx, 0) = r & 0xFFC;
    else if (b & 2) *npk_lm_reg(e->m, e->ctx, 1) = r & 0xFFC;
    npk_set_alu(e, a, b, r);
}

void npk_alu_CAM_READ_TAG(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b;
    npk_alu_sources(e, u, &a, &b);
    npk_wr(e, &u->d, e->m->cam_tag[b % e->c->cfg.cam_entries]);
}

void npk_alu_CAM_READ_STATE(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b;
    npk_alu_sources(e, u, &a, &b);
    npk_wr(e, &u->d, (uint32_t)e->m->cam_state[b % e->c->cfg.cam_entries] << 8);
}
