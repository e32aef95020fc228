// Shared by ring_ping.uc and ring_pong.uc: which scratch rings carry the ball.
#ifndef RING_PINGPONG_H
#define RING_PINGPONG_H
#define RING_TO_PONG    (0 << 2)        // scratch ring 0 (address = ring * 4)
#define RING_TO_PING    (1 << 2)        // scratch ring 1
#define ROUNDS          100
#endif
