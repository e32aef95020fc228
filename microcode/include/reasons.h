// Generated from microcode/reasons.yaml by `npk traffic reasons --header`.
// Do not edit: change the YAML and regenerate.
#ifndef NPK_REASONS_H
#define NPK_REASONS_H

#define DROP_SHORT_FRAME                 1  // step 1: frame shorter than 60 bytes (the 64-byte Ethernet minimum less the FCS)
#define DROP_OVERSIZE_FRAME              2  // step 2: frame longer than 1514 bytes (1518 less the FCS)
#define DROP_DST_MAC_MISMATCH            3  // step 3: Ethernet destination is neither the receiving port's MAC nor a group address (I/G bit set)
#define DROP_NON_IPV4_ETHERTYPE          4  // step 5: EtherType is neither 0x0806 (ARP) nor 0x0800 (IPv4); includes 802.1Q-tagged frames (0x8100), IPv6, and 802.3 length/LLC frames (type <= 1500)
#define DROP_BAD_VERSION                 5  // step 6: IP version field is not 4
#define DROP_BAD_IHL                     6  // step 7: IHL < 5
#define DROP_BAD_TOTAL_LENGTH            7  // step 8: IP total length < IHL * 4
#define DROP_IP_TRUNCATED                8  // step 9: IP total length > frame length - 14 (the datagram does not fit in the frame)
#define DROP_BAD_CHECKSUM                9  // step 10: Internet checksum over the IHL*4 header bytes is not zero
#define DROP_MARTIAN_DST                10  // step 12: destination in 0.0.0.0/8, 127.0.0.0/8, or 240.0.0.0/4 except 255.255.255.255
#define DROP_OBSOLETE_BROADCAST         11  // step 13: destination is the all-zeros host address {prefix, 0} of one of the router's attached subnets
#define DROP_LINK_BROADCAST_UNICAST_IP  12  // step 16: received as a link-layer broadcast or multicast (I/G bit set) but the IP destination is unicast
#define DROP_MARTIAN_SRC                13  // step 18: source in 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4, 240.0.0.0/4 (includes 255.255.255.255), or the broadcast address of an attached subnet
#define DROP_RBUF_FULL                  32  // resource: a frame arrived at the MSF with no free RBUF element
#define DROP_NO_RX_THREAD               33  // resource: an RBUF element was filled but no receive thread was on the freelist to take it
#define DROP_BUFFER_EXHAUSTED           34  // resource: no packet buffer (DRAM buffer / descriptor) was free at receive
#define DROP_QUEUE_FULL                 35  // resource: the output queue (queue manager) or an inter-block ring was full
#define DROP_EXCEPTION_RING_FULL        36  // resource: an exception could not be queued to the XScale because its ring was full
#define DROP_TBUF_UNDERRUN              37  // resource: transmit started but the TBUF element was not filled in time; the frame is aborted
#define DROP_CONTROL_QUEUE_FULL         38  // resource: a frame the control plane sent (packet word bit 25) found its output queue full
#define DROP_CODE_LIMIT 39

#define EXC_ARP              1  // step 4: EtherType 0x0806 (after the MAC filter)
#define EXC_IP_OPTIONS       2  // step 11: IHL > 5
#define EXC_BROADCAST        3  // step 14: destination is 255.255.255.255, or the all-ones host address of one of the router's attached subnets
#define EXC_MULTICAST        4  // step 15: destination in 224.0.0.0/4
#define EXC_LOCAL_DELIVERY   5  // step 17: destination equals one of the router's port addresses (any port, not only the receiving one)
#define EXC_NO_ROUTE         6  // step 19: longest-prefix match over the route table and the connected subnets finds nothing
#define EXC_TTL_EXPIRED      7  // step 20: TTL <= 1 (decrementing would reach zero)
#define EXC_REDIRECT         8  // step 21: send_redirects is on, the route's output port is the receiving port, and the source address is on that port's subnet
#define EXC_ARP_MISS         9  // step 22: the next hop (the route's next hop, or the destination itself for a connected/direct route) has no ARP entry
#define EXC_PLUGIN          10  // resource: the packet's flow has a flow-table entry whose action is a plugin (`-D classify=flows`, docs/flows.md)
#define EXC_CODE_LIMIT 11

#endif // NPK_REASONS_H
