/* image.h -- see image.c */
#ifndef NPKD_IMAGE_H
#define NPKD_IMAGE_H
#include <stddef.h>

#include "cfg.h"
int build_image(const npkd_cfg *cfg, const char *out, char *err, size_t errlen);
#endif
