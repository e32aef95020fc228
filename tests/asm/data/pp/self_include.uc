#include "self_include.uc"
