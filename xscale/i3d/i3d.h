/* i3d.h -- the I3 daemon: the slow path of the SPP's I3 slices (docs/spp.md), on the
 * GPE (a host process attached to the emulator) or on the XScale.  It keeps the slices'
 * triggers and Chord fingers, answers the exceptions of I3 slices (no trigger filter,
 * several, no finger, complex processing: seed 004's "all other packets are handled by
 * the GPE"), and configures the fast path itself while traffic runs: trigger filters in
 * the TCAM and fingers in SRAM (fast.h: the safe order).  README.md says more.
 *
 * The engine reaches the chip only through npkd_mem (memory windows) and i3d_hw (rings,
 * the free list, the clock), so the unit tests run it against plain buffers. */
#ifndef I3D_I3D_H
#define I3D_I3D_H
#include <stddef.h>
#include <stdint.h>

#include "../npkd/hw.h"
#include "../npkd/mem.h"
#include "fast.h"
#include "store.h"

#define I3D_PATH 512
#define I3D_MAX_PORTS 16
#define I3D_MAX_ARP 256
#define I3D_FRAME_MAX 2048

/* the counters, in the order of the statistics block (the host reads their names here:
 * npkit.toolchain.system.i3d) */
#define I3D_STATS(X)                                                                     \
    X(exceptions)           /* records taken off the exception ring */                   \
    X(exc_no_trigger)       /* i3_no_trigger: in range, no single TCAM filter */         \
    X(exc_multi_trigger)    /* i3_multi_trigger */                                        \
    X(exc_no_finger)        /* i3_no_finger */                                            \
    X(exc_complex)          /* i3_complex */                                              \
    X(exc_to_gpe)           /* spp_to_gpe on an i3 slice */                               \
    X(exc_other)            /* a code or slice i3d does not handle, not relayed */        \
    X(relayed)              /* records of other slices passed on (the relay ring) */      \
    X(relayed_back)         /* frames the other daemon (npkd) handed back for cp_to_qm */ \
    X(delivered)            /* frames sent to a trigger's receiver */                    \
    X(copies)               /* ... of those, extra copies (several triggers) */          \
    X(finger_forwarded)     /* packets sent on by a finger */                             \
    X(gpe_consumed)         /* matched a trigger whose action is gpe: the end */          \
    X(dropped_no_trigger)   /* in range and no trigger at all */                          \
    X(dropped_no_finger)    /* out of range and no finger to send it by */                \
    X(dropped_hop_limit)    /* hop limit <= 1 */                                          \
    X(dropped_filter)       /* a trigger whose action is drop */                          \
    X(dropped_bad)          /* not an I3 packet of a known slice, no ARP for the hop */   \
    X(no_buffer)            /* a copy with no buffer free */                              \
    X(filters_installed)                                                                  \
    X(filters_removed)                                                                    \
    X(fingers_written)                                                                    \
    X(tcam_full)            /* a filter that found no free entry (kept: GPE path) */      \
    X(control_requests)                                                                   \
    X(control_errors)                                                                     \
    X(stale_filters_cleared) /* at start: filters a killed predecessor left in the TCAM */

enum {
#define I3D_STAT_ENUM(name) I3S_##name,
    I3D_STATS(I3D_STAT_ENUM)
#undef I3D_STAT_ENUM
    I3S_COUNT
};

/* the statistics block (SRAM, cfg `stats`): LW0 magic "I3D0", LW1 format version, LW2
 * state (1 running), LW3 starts; then the counters; at +I3D_LAT_OFF the GPE path's delay:
 * samples, maximum ns, sum ns (high, low); at +I3D_SAMPLES_OFF the last I3D_SAMPLES
 * delays in ns (sample k at slot k % I3D_SAMPLES).  A delay is from the packet's receive
 * timestamp (descriptor LW5, 16 cycles a tick) to the daemon's hand-over of its frame to
 * the queue manager (the cp ring). */
#define I3D_STATS_MAGIC 0x49334430u
#define I3D_STATS_VERSION 1u
#define I3D_STATS_HDR 16u
#define I3D_LAT_OFF 0x400u
#define I3D_SAMPLES_OFF 0x800u
#define I3D_SAMPLES 4096u

/* the exception log (SRAM, stats + I3D_LOG_OFF, read by the host as npkd's): LW0 records
 * so far, LW1 capacity, then 16-byte records (slot k % I3D_LOG_CAP):
 *   LW0 digest of the received frame (FNV-1a over its first 128 bytes)
 *   LW1 frame length << 16 | input port << 8 | exception code
 *   LW2 action << 24 | frames sent about it << 16 | buffer handle
 *   LW3 time handled, microseconds
 * and the filter mirror (stats + I3D_MIRROR_OFF: LW0 filters, LW1 generation, LW2 when a
 * TCAM filter was last written in or out (µs of emulated time, read just after), then 32
 * bytes a filter: handle, slice << 16 | code << 8 | action, id high, id low,
 * len << 24 | fast << 16 | in (0xFF any) << 8 | out, next hop address, next hop UDP << 16,
 * TCAM entry (-1 none)), rewritten after every change, the generation last: a reader
 * that finds the same generation before and after its read has a whole mirror (the XScale
 * may be stopped between any two writes).  What the host's judge of the GPE path
 * (npkit.toolchain.system.i3d_run) expects the daemon to do. */
#define I3D_LOG_OFF 0x40000u
#define I3D_LOG_CAP 32768u
#define I3D_MIRROR_OFF 0x8000u
#define I3D_MIRROR_CAP 4096u
enum { I3A_CONSUMED = 1, I3A_FORWARDED = 2, I3A_DROPPED = 3, I3A_RELAYED = 5 };

/* exception codes of docs/spp.md §8 */
enum { EXC_SPP_TO_GPE = 20, EXC_I3_NO_TRIGGER = 21, EXC_I3_MULTI = 22, EXC_I3_NO_FINGER = 23, EXC_I3_COMPLEX = 24 };
#define SLICE_SUBSTRATE 255u
#define PW_CONTROL (1u << 25)

/* tunables: name, default */
#define I3D_OPTIONS(X)                                                                  \
    X(batch, 16)                /* exception records taken before other work */         \
    X(ctl_idle_us, 100000)      /* a control connection idle this long is closed */     \
    X(ctl_answer_max, 1048576)  /* a control answer's bytes at most */                  \
    X(clock_mhz, 1400)          /* the MEs' clock: receive timestamps are 16 cycles a tick */ \
    X(slow_slice, 0)            /* a slice id whose filters start out of the TCAM: its packets \
                                 * take the GPE path (the GPE's latency experiment) */

typedef struct i3d_opts {
#define I3D_OPT_FIELD(name, dflt) uint32_t name;
    I3D_OPTIONS(I3D_OPT_FIELD)
#undef I3D_OPT_FIELD
} i3d_opts;

typedef npkd_hw i3d_hw;   /* rings, queues, clock: npkd/hw.h */

typedef struct i3d_arp {
    uint32_t ip;
    uint8_t mac[6];
} i3d_arp;

/* a command the configuration times (`at NS COMMAND...`): made at that emulated time, as
 * if it came on the control socket (the run's timed filter installs, deterministic) */
#define I3D_TIMED_MAX 64
#define I3D_TIMED_LINE 400
typedef struct i3d_timed {
    uint64_t at_ns;
    char line[I3D_TIMED_LINE];
} i3d_timed;

typedef struct i3d {
    npkd_mem *mem;
    i3d_hw hw;
    i3_store st;
    fast fp;
    i3d_opts opt;
    /* system (microcode/README.md §2) */
    uint32_t desc_base, desc_shift, n_bufs, buf_base, buf_shift, freelist_q;
    int exc_ring, cp_ring, relay_ring;          /* relay -1: none */
    int back_ring;                              /* the relay's frames back (npkd's): -1 none */
    uint64_t back_until;                        /* look at the back ring often until then (ns) */
    uint32_t back_pw;                           /* a frame's first word taken, its second not yet (0: none) */
    uint32_t mitable, mirows, migen;            /* spp.md §4.1 (0: not written; migen: its generation word) */
    uint8_t port_mac[I3D_MAX_PORTS][6];
    uint32_t nports;
    i3d_arp arp[I3D_MAX_ARP];
    uint32_t narp;
    uint32_t stats_base;                        /* 0: no statistics block */
    uint32_t stats[I3S_COUNT];
    uint64_t lat_n, lat_sum, lat_max;
    uint32_t log_count, mirror_gen;
    uint64_t now;                               /* emulated ns, read as a record is taken */
    uint32_t cp_room;                           /* words free on the cp ring, as last read */
    uint64_t changed_ns;                        /* when a TCAM filter was last written in or out */
    char socket_path[I3D_PATH];
    i3d_timed timed[I3D_TIMED_MAX];
    uint32_t ntimed, next_timed;                /* in the configuration's order (times ascending) */
    uint8_t frame[I3D_FRAME_MAX];
} i3d;

void i3d_init(i3d *d, npkd_mem *mem, const i3d_hw *hw);
void i3d_free(i3d *d);
/* the configuration file (i3cfg.c): 0, or -1 with "FILE:LINE: what" in err */
int i3d_conf_load(i3d *d, const char *path, char *err, size_t n);
/* one configuration line (also what the tests feed): 0, or -1 with the problem in err */
int i3d_conf_line(i3d *d, char *line, char *err, size_t n);
/* after the configuration: the TCAM bookkeeping (the slice file's filters adopted) */
int i3d_ready(i3d *d, char *err, size_t n);

/* one control command (cmd.c); the answer's lines through out(ctx, text), the last one
 * "ok" or "error: ..." */
typedef void (*i3d_out)(void *ctx, const char *text);
void i3d_command(i3d *d, char *line, i3d_out out, void *ctx);

/* take up to max records off the exception ring and act on each; returns how many */
int i3d_poll(i3d *d, int max);
/* the frames the other daemon handed back on the back ring, put on cp_to_qm whole (two
 * producers on one ring would interleave a frame's two words): how many */
int i3d_back(i3d *d);
void i3d_exception(i3d *d, uint32_t pw, uint32_t rec);   /* one record (tests) */
void i3d_publish(i3d *d, uint32_t starts);
int i3d_mi_sync(i3d *d);                                  /* restart: rows of slices it does not know out */
void i3d_mirror(i3d *d);                                 /* the filter mirror, after a change */
/* the timed commands due by d->now: how many were made (their answers go to stderr) */
int i3d_timed_due(i3d *d);
uint64_t i3d_timed_next(const i3d *d);                   /* UINT64_MAX: none left */
const char *i3d_stat_name(int i);
#endif
