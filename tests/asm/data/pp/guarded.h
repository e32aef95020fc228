#ifndef GUARDED_H
#define GUARDED_H
guarded_body
#endif
