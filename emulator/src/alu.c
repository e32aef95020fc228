/* Datapath helpers: CRC unit and CAM. */
#include "internal.h"

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
    case 2: *poly = 0x1021; *width = 16; break;          /* CCITT */
    case 4: *poly = 0x04C11DB7; *width = 32; break;      /* CRC-32 */
    case 5: *poly = 0x1EDC6F41; *width = 32; break;      /* iSCSI (Castagnoli) */
    case 6: *poly = 0x233; *width = 10; break;           /* CRC-10 */
    case 7: *poly = 0x05; *width = 5; break;             /* CRC-5 */
    default: *poly = 0; *width = 0; break;
    }
}

/* bytes_sel (crc_bytes enum): which bytes of the operand enter the unit;
 * byte 0 = bits 31:24 (the first byte in network order) */
static void byte_range(uint32_t sel, int *first, int *last)
{
    switch (sel) {
    case 0: *first = 0; *last = 3; break;
    case 1: *first = 1; *last = 3; break;
    case 2: *first = 2; *last = 3; break;
    case 3: *first = 3; *last = 3; break;
    case 4: *first = 0; *last = 2; break;
    case 5: *first = 0; *last = 1; break;
    default: *first = 0; *last = 0; break;
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
