/* Sanitizer driver for the MSF device (tests/msf/test_sanitizers.py builds it with
 * ASan/UBSan and leak checking): the pass-through program (words in pt_words.h,
 * written by the test) forwards mixed-size frames on five ports at line rate with
 * 64-, 128-byte... elements; a slow variant overloads the MSF with a small RBUF and a
 * cut-through PHY; every frame is accounted for and everything is freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npk_emu.h"
#include "npk_msf.h"
#include "test_config.h"
#include "pt_words.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

static void chip_config(npk_config *c)
{
    npk_test_config(c, "asan-msf", 10);  /* history off (capacity 0, from the shared config) */
}

static void msf_config(npk_msf_cfg *m, uint32_t rbuf_elems, uint32_t cut)
{
    memset(m, 0, sizeof *m);
    m->ports = 5; m->rate_bps = 1000000000ull; m->rbuf_elem_bytes = 64; m->rbuf_elems = rbuf_elems;
    m->tbuf_elem_bytes = 64; m->tbuf_elems = 128; m->preamble_bytes = 8; m->fcs_bytes = 4; m->ifg_bytes = 12;
    m->tx_fifo_bytes = 4096; m->spi_bps = 12800000000ull; m->freelist_depth = 128; m->tx_start_bytes = cut;
}

/* n packets per port, sizes 60..1514 from a fixed sequence, back to back at 1 Gb/s */
static uint64_t run_case(const uint64_t *words, size_t nwords, uint32_t rbuf_elems, uint32_t cut, int n,
                         uint64_t *drops_out)
{
    npk_config cfg;
    chip_config(&cfg);
    npk_chip *chip = npk_create(&cfg);
    CHECK(chip != NULL);
    if (!chip) return 0;
    CHECK(npk_load_ustore(chip, 0, words, nwords, 8) == NPK_OK);
    CHECK(npk_me_enable(chip, 0, 0xFF) == NPK_OK);
    npk_msf_cfg mc;
    msf_config(&mc, rbuf_elems, cut);
    npk_msf *msf = npk_msf_create(chip, &mc);
    CHECK(msf != NULL);
    size_t total = (size_t)n * 5;
    uint64_t *t = calloc(total, sizeof *t);
    uint8_t *port = calloc(total, 1);
    uint32_t *id = calloc(total, sizeof *id);
    uint16_t *len = calloc(total, sizeof *len);
    uint8_t *data = calloc(total * 1514, 1);
    size_t off = 0;
    uint64_t clock[5] = {0};
    for (size_t i = 0; i < total; i++) {
        port[i] = (uint8_t)(i % 5);
        len[i] = (uint16_t)(60 + (i * 7919) % 1455);
        t[i] = clock[port[i]];
        clock[port[i]] += (uint64_t)(len[i] + 24) * 8;
        id[i] = (uint32_t)i;
        for (int k = 0; k < len[i]; k++) data[off + (size_t)k] = (uint8_t)(i + (size_t)k);
        off += len[i];
    }
    CHECK(npk_msf_rx_add(msf, total, t, port, id, len, data) == NPK_OK);
    CHECK(npk_msf_rx_add(msf, 1, t, (const uint8_t *)"\x09", id, len, data) == NPK_EINVAL);
    uint64_t end_ns = 0;
    for (int p = 0; p < 5; p++) if (clock[p] > end_ns) end_ns = clock[p];
    int reason;
    uint64_t sent = 0, aborted = 0;
    for (uint64_t ns = 0; ns < end_ns + 40000; ns += 10000) {
        npk_run(chip, 14000, &reason);
        size_t nb = 0, nf = npk_msf_tx_ready(msf, &nb);
        uint8_t *op = malloc(nf + 1), *ab = malloc(nf + 1), *od = malloc(nb + 1);
        uint64_t *ot = malloc((nf + 1) * sizeof *ot);
        uint16_t *ol = malloc((nf + 1) * sizeof *ol);
        size_t got = npk_msf_tx_drain(msf, op, ot, ol, ab, od, nf, nb);
        CHECK(got == nf);
        for (size_t i = 0; i < got; i++) { if (ab[i]) aborted++; else sent++; }
        free(op); free(ab); free(od); free(ot); free(ol);
    }
    size_t nd = npk_msf_drops(msf, NULL, NULL, NULL, 0);
    uint32_t *did = malloc((nd + 1) * sizeof *did);
    uint8_t *dp = malloc(nd + 1), *dr = malloc(nd + 1);
    CHECK(npk_msf_drops(msf, did, dp, dr, nd) == nd);
    npk_msf_port_stats ps;
    uint64_t offered = 0, rx_drops = 0, underruns = 0;
    for (int p = 0; p < 5; p++) {
        CHECK(npk_msf_port_stats_get(msf, p, &ps) == NPK_OK);
        offered += ps.rx_offered;
        rx_drops += ps.rx_drop_rbuf_full + ps.rx_drop_no_rx_thread + ps.rx_drop_oversize;
        underruns += ps.tx_drop_underrun;
    }
    CHECK(npk_msf_port_stats_get(msf, 5, &ps) == NPK_EINVAL);
    CHECK(offered == total);
    CHECK(nd == rx_drops);
    CHECK(aborted == underruns);
    npk_msf_stats st;
    CHECK(npk_msf_stats_get(msf, &st) == NPK_OK);
    CHECK(offered == sent + rx_drops + underruns);  /* drained: nothing in flight */
    *drops_out = rx_drops + underruns;
    free(did); free(dp); free(dr);
    free(t); free(port); free(id); free(len); free(data);
    npk_msf_destroy(msf);
    npk_destroy(chip);
    return sent;
}

int main(void)
{
    uint64_t drops = 0;
    uint64_t sent = run_case(PT, sizeof PT / sizeof PT[0], 128, 0, 60, &drops);
    CHECK(sent == 300 && drops == 0);
    sent = run_case(PT_SLOW, sizeof PT_SLOW / sizeof PT_SLOW[0], 16, 64, 60, &drops);
    CHECK(drops > 0 && sent > 0 && sent + drops == 300);
    npk_msf_cfg bad;
    msf_config(&bad, 200, 0);  /* 200 x 64 > 8 KB */
    npk_config cfg;
    chip_config(&cfg);
    npk_chip *chip = npk_create(&cfg);
    CHECK(npk_msf_create(chip, &bad) == NULL);
    npk_destroy(chip);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("OK\n");
    return 0;
}
