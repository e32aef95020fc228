immed[a, 1]
#include "does_not_exist.h"
