/* plugins.c -- the plugins npkd can load into a slot (flows.h).  Each one's model, what
 * the judge expects of it, is beside it in npkit.emulator.traffic.plugins. */
#include <stddef.h>
#include <stdint.h>

#include "flows.h"

static void ip_checksum(uint8_t *f)
{
    uint32_t ihl = (uint32_t)(f[14] & 0xF) * 4, s = 0;
    f[24] = f[25] = 0;
    for (uint32_t i = 0; i < ihl; i += 2) s += (uint32_t)f[14 + i] << 8 | f[15 + i];
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    s = ~s & 0xFFFF;
    f[24] = (uint8_t)(s >> 8);
    f[25] = (uint8_t)s;
}

/* the DSCP becomes args[0] (default 46, EF), ECN kept, the header checksum recomputed */
static int dscp(uint8_t *f, uint32_t len, const uint32_t *args, uint32_t nargs, uint64_t *state, uint64_t now)
{
    (void)len, (void)state, (void)now;
    uint32_t v = (nargs ? args[0] : 46) & 0x3F;
    f[15] = (uint8_t)(v << 2 | (f[15] & 3));
    ip_checksum(f);
    return 1;
}

/* a token bucket: args[0] bytes a millisecond, args[1] bytes deep; a packet (its IP total
 * length) that finds too few tokens is dropped.  state[0] tokens, state[1] last time + 1 */
static int meter(uint8_t *f, uint32_t len, const uint32_t *args, uint32_t nargs, uint64_t *state, uint64_t now)
{
    (void)len;
    uint64_t rate = nargs > 0 ? args[0] : 125000, depth = nargs > 1 ? args[1] : 2 * rate;
    uint64_t tokens = state[1] ? state[0] : depth, last = state[1] ? state[1] - 1 : now;
    tokens += (now - last) * rate / 1000000;
    if (tokens > depth) tokens = depth;
    uint32_t size = (uint32_t)f[16] << 8 | f[17];
    state[1] = now + 1;
    if (tokens < size) {
        state[0] = tokens;
        return 0;
    }
    state[0] = tokens - size;
    return 1;
}

const plugin_def npkd_plugins[] = {
    {"dscp", dscp, "re-mark the DSCP (args: value, default 46)"},
    {"meter", meter, "drop over-rate packets (args: bytes a ms, bucket bytes)"},
    {NULL, NULL, NULL},
};
