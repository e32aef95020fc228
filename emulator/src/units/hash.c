/* Hash unit: hash_48/64/128 of 1-3 keys.  Each key (2 longwords for 48/64
 * bits, 4 for 128; most significant first) is multiplied by the configured
 * multiplier as polynomials over GF(2) and reduced modulo a fixed irreducible
 * polynomial of the same degree; the result replaces the key in the read
 * transfer registers.  Deterministic, as the HRM's hash unit. */
#include "../internal.h"

typedef struct { uint64_t hi, lo; } u128;

static u128 gf_mul(u128 a, u128 b, int bits, u128 poly)
{
    u128 r = {0, 0};
    for (int i = bits - 1; i >= 0; i--) {
        /* r = r * x mod p */
        int top = bits == 128 ? (int)(r.hi >> 63) : (bits > 64 ? 0 : (int)((r.lo >> (bits - 1)) & 1));
        r.hi = (r.hi << 1) | (r.lo >> 63);
        r.lo <<= 1;
        if (bits < 64) r.lo &= (1ull << bits) - 1;
        if (bits <= 64) r.hi = 0;
        if (top) { r.hi ^= poly.hi; r.lo ^= poly.lo; }
        int bit = i >= 64 ? (int)((b.hi >> (i - 64)) & 1) : (int)((b.lo >> i) & 1);
        if (bit) { r.hi ^= a.hi; r.lo ^= a.lo; }
    }
    return r;
}

static void hash_keys(npk_chip *c, npk_event *e, uint32_t *out, int bits)
{
    int words = bits == 128 ? 4 : 2;
    /* x^48+x^7+x^4+x^2+x+1 ... low terms of the reduction polynomials */
    u128 poly = {0, bits == 48 ? 0x97ull : (bits == 64 ? 0x1Bull : 0x87ull)};
    u128 mult;
    if (bits == 48) { mult.hi = 0; mult.lo = c->cfg.hash_mult48 & 0xFFFFFFFFFFFFull; }
    else if (bits == 64) { mult.hi = 0; mult.lo = c->cfg.hash_mult64; }
    else { mult.hi = c->cfg.hash_mult128_hi; mult.lo = c->cfg.hash_mult128_lo; }
    uint32_t nkeys = (uint32_t)e->count / (uint32_t)words;
    for (uint32_t k = 0; k < nkeys; k++) {
        const uint32_t *d = &e->data[k * (uint32_t)words];
        u128 key;
        if (words == 2) {
            key.hi = 0;
            key.lo = ((uint64_t)d[0] << 32) | d[1];
            if (bits == 48) key.lo &= 0xFFFFFFFFFFFFull;
        } else {
            key.hi = ((uint64_t)d[0] << 32) | d[1];
            key.lo = ((uint64_t)d[2] << 32) | d[3];
        }
        u128 r = gf_mul(key, mult, bits, poly);
        uint32_t *o = &out[k * (uint32_t)words];
        if (words == 2) { o[0] = (uint32_t)(r.lo >> 32); o[1] = (uint32_t)r.lo; }
        else { o[0] = (uint32_t)(r.hi >> 32); o[1] = (uint32_t)r.hi; o[2] = (uint32_t)(r.lo >> 32); o[3] = (uint32_t)r.lo; }
    }
}

void npk_hash_hash_48(npk_chip *c, npk_event *e, uint32_t *out) { hash_keys(c, e, out, 48); }
void npk_hash_hash_64(npk_chip *c, npk_event *e, uint32_t *out) { hash_keys(c, e, out, 64); }
void npk_hash_hash_128(npk_chip *c, npk_event *e, uint32_t *out) { hash_keys(c, e, out, 128); }
