/* stats.h -- the daemon's statistics: one 32-bit counter each, in this order, in the
 * statistics block in SRAM (big-endian words, after a 16-byte header: magic "NPKD",
 * layout version, state 0 starting / 1 loading the route table / 2 ready / 3 ready with
 * the route table to be loaded on the first change, starts).
 * npkit.toolchain.system.control reads the names from this list. */
#ifndef NPKD_STATS_H
#define NPKD_STATS_H

#define NPKD_STATS(X)                                                                      \
    X(exc_arp) X(exc_ip_options) X(exc_broadcast) X(exc_multicast) X(exc_local_delivery) \
    X(exc_no_route) X(exc_ttl_expired) X(exc_redirect) X(exc_arp_miss) X(exc_unknown)    \
    X(icmp_time_exceeded) X(icmp_net_unreachable) X(icmp_host_unreachable)                \
    X(icmp_port_unreachable) X(icmp_source_route_failed) X(icmp_redirect_host)            \
    X(icmp_param_problem) X(icmp_echo_reply) X(icmp_protocol_unreachable)                \
    X(icmp_suppressed_rate_limit) X(icmp_suppressed_rules) X(icmp_no_route_back)          \
    X(arp_requests_received) X(arp_replies_received) X(arp_ignored) X(arp_learnt)         \
    X(arp_replies_sent) X(arp_requests_sent) X(arp_resolved) X(arp_unresolved) X(arp_aged) \
    X(held) X(held_sent) X(held_dropped_overflow) X(held_dropped_unresolved)              \
    X(own_dropped_no_arp)                                                                  \
    X(forwarded) X(options_processed) X(options_bad) X(dropped_after_options)            \
    X(local_echo_requests) X(local_udp) X(local_proto_unsupported) X(local_counted)       \
    X(broadcast_counted) X(multicast_counted)                                              \
    X(frames_sent) X(tx_no_buffer) X(tx_backlog_max) X(tx_backlog) X(holding)              \
    X(buffers_reclaimed) X(lpm_units_recovered) X(killed_backlog_own)                     \
    X(killed_backlog_forwarded)                                                            \
    X(routes) X(routes_added) X(routes_deleted) X(route_errors) X(timed_changes)          \
    X(timed_late)                                                                          \
    X(control_requests) X(log_records) X(wakeups) X(sram_writes)

enum {
#define NPKD_STAT_ENUM(name) ST_##name,
    NPKD_STATS(NPKD_STAT_ENUM)
#undef NPKD_STAT_ENUM
        ST_COUNT
};
#define NPKD_STATS_MAGIC 0x4E504B44u   /* "NPKD" */
#define NPKD_STATS_VERSION 1u
#define NPKD_STATS_HDR 16u
#endif
