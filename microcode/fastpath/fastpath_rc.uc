// fastpath_rc.uc -- the parallel layout's fast path with Panama's aggregate route cache
// in front of the trie (layout parameter lookup=range_cache; lookup.h, README §4.2).
#define LOOKUP_RANGE_CACHE 1
#include "fastpath.uc"
