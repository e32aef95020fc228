sibling_of_nested   /* found next to sub/nested.h, not next to main.uc */
