/* Per-instruction profile (npk_emu.h npk_profile_enable): execution and taken-branch
 * counts per ME and control-store address.  Counted by me_exec, the general path,
 * which every word takes while the profile is on (npk_run clears fast_ok). */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static int is_cond_branch(const npk_uop *u)
{
    if (u->cls == NPK_IC_BRANCH) return u->op != NPK_BRANCH_COND_ALWAYS;
    return u->cls == NPK_IC_BR_BIT || u->cls == NPK_IC_BR_BYTE;
}

__attribute__((cold)) void npk_profile_rec(npk_chip *c, const npk_me *m, const npk_ctx *x, uint32_t pc, int had_br)
{
    uint64_t *p = c->prof + (size_t)m->idx * 2 * c->cfg.ustore_words;
    p[pc]++;
    if (!is_cond_branch(&m->uop[pc]))
        return;
    /* taken: the pc moved at once, or a deferred branch is now in flight that was not */
    if (x->pc != pc + 1 || (x->br_pending && !had_br))
        p[c->cfg.ustore_words + pc]++;
}

int npk_profile_enable(npk_chip *c, int on)
{
    if (!c || (on != 0 && on != 1)) return NPK_EINVAL;
    if (!on) {
        free(c->prof);
        c->prof = NULL;
        return NPK_OK;
    }
    if (!c->prof) {
        c->prof = calloc(1, npk_profile_bytes(c));
        if (!c->prof) return NPK_ENOMEM;
    } else {
        memset(c->prof, 0, npk_profile_bytes(c));
    }
    return NPK_OK;
}

int npk_profile_read(npk_chip *c, int me, uint64_t *exec, uint64_t *taken, size_t n)
{
    if (!c || me < 0 || (uint32_t)me >= c->cfg.num_me || n > c->cfg.ustore_words) return NPK_EINVAL;
    if (!c->prof) return NPK_ESTATE;
    const uint64_t *p = c->prof + (size_t)me * 2 * c->cfg.ustore_words;
    if (exec) memcpy(exec, p, n * sizeof *exec);
    if (taken) memcpy(taken, p + c->cfg.ustore_words, n * sizeof *taken);
    return NPK_OK;
}
