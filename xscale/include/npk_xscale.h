/*
 * npk_xscale.h -- the IXP2800 chip as a program on its XScale core sees it
 * (npkit).  Include it in C programs built for the XScale (placement `xscale`,
 * ARMv5TE Linux on the emulator's Unicorn core) or natively for the host
 * (placement `gpe`, a Linux process attached to a running emulator).  The same
 * source runs in both; link xscale/lib/npk_xscale.c with it.
 *
 * Byte order.  The microengines store SRAM, DRAM and scratch words big-endian
 * (byte 0 = bits 31:24).  The XScale runs little-endian Linux (and the gpe
 * host is little-endian): a 32-bit word shared with microcode is read with
 * ntohl(*p) and written with *p = htonl(v), exactly as on the real part with a
 * little-endian kernel.  CSR accesses (npk_csr_read/write) carry host-order
 * values: no swapping there.
 *
 * Physical windows (the offsets given to mmap on the device).  HRM = Intel
 * IXP2800 Hardware Reference Manual.
 *   DRAM      0x0000_0000  up to 2 GB, one flat space (HRM p.187)
 *   SRAM      0x8000_0000 + ch << 28: channel select in bits 29:28 of an XScale
 *             address, which the gasket moves to bits 31:30 (HRM p.218)
 *   CAP CSRs  0xC000_0000 + the CSR address microcode uses in cap[] (e.g.
 *             XSCALE_INT_A 0x4B20); 64 KB (HRM p.76 chip-wide CSRs); a write to
 *             INTERTHREAD_SIG (0x4B30: [3:0] signal, [6:4] context, [11:7] ME's hardware
 *             number: 0x00-0x07, 0x10-0x17 on the IXP2800)
 *             signals that thread; other CSRs are plain storage
 *   (MSF CSRs are not modelled from the XScale yet: reads 0, writes dropped)
 *   MSF       0xC800_0000  MSF CSR space (as the IXP2000 Linux port maps it)
 *   scratch   0xCB00_0000  16 KB scratchpad memory, plain reads and writes
 *   ring get/put 0xCB40_0000 (address as the IXP2000 Linux port maps it): a
 *             32-bit read at + 4*ring is Get(ring, 1), a write is Put(ring, 1)
 *             (HRM p.231); npkit adds the count of ring n at 0x100 + 4n and its
 *             free space at 0x200 + 4n (reads); an empty ring gets 0, a full
 *             ring drops the word, as the MEs' scratch[get|put]
 *   scratch atomics 0xCB80_0000 + (op << 16) + offset: a store applies op with
 *             the stored value (no data back), a SWP applies it and returns the
 *             old word, a load reads (HRM p.231: aliased addresses; the alias
 *             layout is npkit's)
 *   SRAM atomics 0xE000_0000 + (op << 25) + (ch << 23) + offset (offset < 8 MB),
 *             same semantics (HRM p.126: the gasket does atomics on SRAM and
 *             scratch only; alias layout npkit's)
 *   SRAM queues 0xF000_0000 + (ch << 23) + offset of a queue descriptor (offset
 *             < 8 MB): a read dequeues (the element's SRAM address, 0 when the
 *             queue is empty), a write enqueues the written element address
 *             (npkit's window: the queue-array commands the MEs issue as
 *             sram[dequeue] / sram[enqueue], done atomically for the XScale)
 *   interrupts 0xD600_0000 (the Linux port's INTCTL base; registers npkit's):
 *             +0 raw XSCALE_INT_A bits (bit n = ME n), +4 raw XSCALE_INT_B
 *             bits, write 1s to clear; +8 interrupts counted so far;
 *             +0x10 / +0x14 emulated time in ns, low / high word (npkit's: the
 *             chip's clock, the same in both placements)
 *
 * Atomicity.  The XScale runs in instruction quanta between which the MEs run
 * (lockstep), so a sequence of plain loads and stores to shared memory may be
 * interleaved with the MEs' commands.  Read-modify-writes shared with microcode go
 * through the CSR windows (atomics, rings, queues), which act in one step.
 *
 * Waiting for an interrupt (UIO style): a blocking read of 4 bytes on the
 * device returns the number of interrupts raised so far, once it differs from
 * what the previous read returned; poll() says POLLIN when a read would not
 * block.  The wait sleeps the core in emulated time.  An interrupt is microcode
 * writing cap[fast_wr, 0, XSCALE_INT_A] (or _B).
 */
#ifndef NPK_XSCALE_H
#define NPK_XSCALE_H
#include <stdint.h>
#include <stddef.h>

#define NPK_XS_DEVICE        "/dev/ixp2800"
#define NPK_XS_DRAM_BASE     0x00000000u
#define NPK_XS_SRAM_BASE     0x80000000u
#define NPK_XS_SRAM_CH_SHIFT 28
#define NPK_XS_CAP_BASE      0xC0000000u
#define NPK_XS_CAP_SIZE      0x00010000u
#define NPK_XS_MSF_BASE      0xC8000000u
#define NPK_XS_MSF_SIZE      0x00010000u
#define NPK_XS_SCRATCH_BASE  0xCB000000u
#define NPK_XS_RING_BASE     0xCB400000u
#define NPK_XS_RING_SIZE     0x00001000u
#define NPK_XS_RING_COUNT    0x100u
#define NPK_XS_RING_FREE     0x200u
#define NPK_XS_SCR_ATOMIC    0xCB800000u
#define NPK_XS_SRAM_ATOMIC   0xE0000000u
#define NPK_XS_INTC_BASE     0xD6000000u
#define NPK_XS_INTC_SIZE     0x00001000u
#define NPK_XS_INTC_RAW_A    0x0u
#define NPK_XS_INTC_RAW_B    0x4u
#define NPK_XS_INTC_COUNT    0x8u
#define NPK_XS_INTC_TIME_LO  0x10u
#define NPK_XS_INTC_TIME_HI  0x14u
#define NPK_XS_SRAM_QUEUE    0xF0000000u

/* CAP CSR addresses used from both sides (HRM; mev2.yaml cap_csrs) */
#define NPK_CAP_XSCALE_INT_A 0x4B20u
#define NPK_CAP_XSCALE_INT_B 0x4B24u
#define NPK_CAP_INTERTHREAD_SIG 0x4B30u

/* atomic operations of the alias windows */
enum { NPK_AT_SET = 1, NPK_AT_CLR = 2, NPK_AT_INCR = 3, NPK_AT_DECR = 4,
       NPK_AT_ADD = 5, NPK_AT_SUB = 6, NPK_AT_SWAP = 7 };

static inline uint32_t npk_xs_sram_phys(unsigned ch, uint32_t off)
{
    return NPK_XS_SRAM_BASE + ((uint32_t)ch << NPK_XS_SRAM_CH_SHIFT) + off;
}

static inline uint32_t npk_xs_sram_queue(uint32_t me_addr)
{
    /* an SRAM address as the MEs give it (channel in bits 31:30) */
    return NPK_XS_SRAM_QUEUE + ((me_addr >> 30) << 23) + (me_addr & 0x7FFFFFu);
}

static inline uint32_t npk_xs_scr_atomic(unsigned op, uint32_t off)
{
    return NPK_XS_SCR_ATOMIC + ((uint32_t)op << 16) + off;
}

static inline uint32_t npk_xs_sram_atomic(unsigned op, unsigned ch, uint32_t off)
{
    return NPK_XS_SRAM_ATOMIC + ((uint32_t)op << 25) + ((uint32_t)ch << 23) + off;
}

/* The device.  npk_dev_open opens /dev/ixp2800 on the XScale; in the gpe build
 * (NPK_GPE defined) it attaches to the emulator that started the process. */
typedef struct npk_dev {
    int fd;                 /* pollable: POLLIN when an interrupt is pending */
    int gpe;                /* 1 in the gpe placement */
    uint32_t last_count;    /* count returned by the last npk_dev_wait */
    volatile uint32_t *win[7];  /* CSR windows mapped so far (xscale placement) */
    int mem_fd[3];          /* gpe: memfds of sram, dram, scratch */
    uint64_t mem_size[3];
    uint32_t sram_ch_bytes;
} npk_dev;

int npk_dev_open(npk_dev *d);                 /* 0, or -errno */
void npk_dev_close(npk_dev *d);
/* Map a memory window (DRAM, an SRAM channel, scratch) at physical `phys`:
 * a plain pointer onto the chip's own memory (words big-endian). NULL on error. */
void *npk_dev_map(npk_dev *d, uint32_t phys, size_t len);
/* CSR windows (CAP, rings, interrupt controller, atomic aliases), host order */
uint32_t npk_csr_read(npk_dev *d, uint32_t phys);
void npk_csr_write(npk_dev *d, uint32_t phys, uint32_t value);
uint32_t npk_csr_swap(npk_dev *d, uint32_t phys, uint32_t value);  /* SWP: old word */
/* Block until an interrupt has been raised since the last wait; returns the
 * interrupt count (UIO read) or -errno. */
int64_t npk_dev_wait(npk_dev *d);

/* Block until an interrupt or until the emulated time deadline_ns: 1 interrupt,
 * 0 deadline reached, -errno. */
int npk_dev_wait_until(npk_dev *d, uint64_t deadline_ns);
/* the chip's emulated time, ns */
uint64_t npk_dev_now_ns(npk_dev *d);
/* SRAM queue-array operations (me_addr: the queue descriptor's ME address) */
uint32_t npk_queue_get(npk_dev *d, uint32_t me_addr);
void npk_queue_put(npk_dev *d, uint32_t me_addr, uint32_t element);

/* scratch rings through the get/put window: 1 done, 0 empty / full */
int npk_ring_get(npk_dev *d, unsigned ring, uint32_t *word);
int npk_ring_put(npk_dev *d, unsigned ring, uint32_t word);
#endif
