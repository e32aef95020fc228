/* util.h -- small containers for npkd (C11, no global state). */
#ifndef NPKD_UTIL_H
#define NPKD_UTIL_H
#include <stddef.h>
#include <stdint.h>

/* A growable array of uint32_t. */
typedef struct u32vec {
    uint32_t *v;
    uint32_t n, cap;
} u32vec;

int u32vec_push(u32vec *a, uint32_t x);          /* 0, or -1 out of memory */
void u32vec_free(u32vec *a);

/* An open-addressing hash map uint32 -> uint32 (linear probing, backward-shift delete). */
typedef struct u32map {
    uint32_t *key, *val;
    uint8_t *used;
    uint32_t cap, n;          /* cap: power of two (0 = empty map) */
} u32map;

uint32_t *u32map_get(const u32map *m, uint32_t key);      /* value slot or NULL */
int u32map_put(u32map *m, uint32_t key, uint32_t val);    /* 0, -1 out of memory */
int u32map_del(u32map *m, uint32_t key);                  /* 1 deleted, 0 absent */
void u32map_free(u32map *m);
/* iteration: for (uint32_t i = 0; i < m->cap; i++) if (m->used[i]) ... */

uint32_t npkd_hash32(uint32_t x);
#endif
