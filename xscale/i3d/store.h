/* store.h -- what the I3 daemon knows: meta-interfaces, slices, filters (I3 triggers and
 * IPv4 filters) and, for each I3 slice, its place on the Chord ring and its finger table.
 * Plain data and pure functions: no memory of the chip here (fast.h writes the fast
 * path's copies), so the unit tests (xscale/tests/c/test_i3d.c) run it alone.
 *
 * The formats are those of docs/spp.md (version 1): trigger identifiers are 64 bits, the
 * Chord ring is the integers mod 2^64 (ring arithmetic is plain unsigned overflow). */
#ifndef I3D_STORE_H
#define I3D_STORE_H
#include <stddef.h>
#include <stdint.h>

#define I3_MAX_SLICES 64
#define I3_MAX_MIS 256
#define I3_NAME 33
#define I3_FINGERS 64
#define I3_MAX_NODES 64

enum { CODE_IPV4 = 1, CODE_I3 = 2 };                      /* spp.md §4.1: the code option byte */
enum { FA_FORWARD = 1, FA_GPE = 2, FA_DROP = 3 };         /* spp.md §5.3: a filter's action */

/* a meta-interface (spp.md §4.1): (address, UDP port) on a physical port; its index is
 * global (the row of the meta-interface table) */
typedef struct i3_mi {
    uint8_t used, port;
    uint16_t udp;
    uint16_t slice;              /* the id of the slice that owns it */
    uint32_t ip;
    char name[I3_NAME];
} i3_mi;

/* where a forwarded packet goes: out of meta-interface `out` to the next hop */
typedef struct i3_hop {
    uint32_t ip;                 /* next hop address: the outer destination */
    uint16_t udp;                /* next hop UDP port */
    uint8_t out;                 /* output meta-interface index */
} i3_hop;

typedef struct i3_finger {
    uint8_t valid;
    uint64_t node;               /* the finger node's id when known (0: not given) */
    i3_hop hop;
} i3_finger;

typedef struct i3_node {
    uint64_t id;
    i3_hop hop;
} i3_node;

/* an I3 slice's place on the ring: it is responsible for (pred, self] */
typedef struct i3_ring {
    uint64_t self, pred;
    uint32_t block;              /* SRAM address of its finger block (spp.md §4.2), 0: none */
    i3_finger finger[I3_FINGERS];
    i3_node node[I3_MAX_NODES];  /* other I3 routers it knows (`node add`): fingers follow */
    uint32_t nnode;
} i3_ring;

typedef struct i3_slice {
    uint16_t id;                 /* 1..4095 (0: the slot is free) */
    uint8_t code;                /* CODE_IPV4 | CODE_I3 */
    uint8_t index;               /* its row in the slice file (the exception record's byte) */
    uint32_t share_ppm;          /* bandwidth share, parts per million */
    char name[I3_NAME];
    i3_ring ring;                /* I3 slices */
} i3_slice;

/* a filter: an I3 trigger (code CODE_I3: packets whose identifier matches `id` in its
 * first `len` bits) or an IPv4 filter (inner dst/src prefixes, protocol, ports) */
typedef struct i3_filter {
    uint32_t handle;             /* 1..: how the control socket names it (0: free) */
    uint16_t slice;
    uint8_t code, action;
    uint8_t fast;                /* 1: it has (or wants) a TCAM filter; 0: the GPE's alone */
    int16_t in;                  /* input meta-interface index, -1: any */
    i3_hop to;
    uint64_t id;                 /* i3 */
    uint8_t len;
    uint32_t dst, dst_mask, src, src_mask;   /* ipv4 (mask 0: any) */
    int32_t proto, dport, sport;             /* ipv4 (-1: any) */
    int32_t entry;               /* TCAM entry of its filter, -1: none */
    uint32_t hits;               /* packets the GPE delivered by it */
} i3_filter;

typedef struct i3_store {
    i3_mi mi[I3_MAX_MIS];
    i3_slice slice[I3_MAX_SLICES];
    i3_filter *flt;
    uint32_t nflt, capflt, next_handle;
} i3_store;

void store_init(i3_store *s);
void store_free(i3_store *s);

/* slices and meta-interfaces: 0, or -1 with a message in why */
int slice_add(i3_store *s, const i3_slice *sl, char *why, size_t n);
int slice_del(i3_store *s, uint16_t id, char *why, size_t n);   /* refused while it has filters */
i3_slice *slice_get(i3_store *s, uint16_t id);
i3_slice *slice_by_index(i3_store *s, uint8_t index);
i3_slice *slice_by_name(i3_store *s, const char *name);
/* a meta-interface at `index` for slice `slice` (index < 0: the first free one); returns
 * the index, or -1 with a message */
int mi_add(i3_store *s, int index, const i3_mi *m, char *why, size_t n);
int mi_by_name(const i3_store *s, uint16_t slice, const char *name);   /* -1 none */
int mi_of(const i3_store *s, uint8_t port, uint32_t ip, uint16_t udp); /* -1 none */

/* filters: the new handle, or 0 with a message in why (no such slice, the wrong code
 * option's fields, an output meta-interface not the slice's, the same filter twice) */
uint32_t flt_add(i3_store *s, const i3_filter *f, char *why, size_t n);
i3_filter *flt_get(i3_store *s, uint32_t handle);
void flt_remove(i3_store *s, uint32_t handle);            /* the record only (fast.h first) */
uint32_t flt_count_slice(const i3_store *s, uint16_t slice);
/* the triggers a packet of I3 slice `slice` with identifier `id` goes to (I3: those of the
 * longest matching length), forwarding ones only: handles into out (at most max), the
 * number found */
uint32_t trig_match(const i3_store *s, uint16_t slice, uint64_t id, uint32_t *out, uint32_t max);
/* every trigger matching at all (any length): what the TCAM's match count would be */
uint32_t trig_match_any(const i3_store *s, uint16_t slice, uint64_t id);
uint64_t id_mask(uint8_t len);                           /* the top len bits set */
uint32_t ip_mask(int len);

/* the Chord ring */
int ring_mine(const i3_ring *r, uint64_t id);            /* id in (pred, self] */
/* spp.md §4.2: the finger the fast path uses for id: the highest set bit of id - self */
int finger_k(const i3_ring *r, uint64_t id);
/* the finger the GPE forwards by: finger k when valid, else the highest valid below k
 * (never past the identifier); -1: none */
int finger_route(const i3_ring *r, uint64_t id);
int node_add(i3_ring *r, uint64_t id, const i3_hop *hop, char *why, size_t n);
int node_del(i3_ring *r, uint64_t id);                   /* 1 removed, 0 not known */
/* the finger table the known nodes give: finger k = the first node clockwise from
 * self + 2^k (Chord: successor(self + 2^k)); none (this router is it): invalid */
void fingers_compute(const i3_ring *r, i3_finger *f);
#endif
