"""The ACL block's rule for the judge (docs/applications.md, "The reference model"):
right after the router's route lookup (no_route), a first fragment of a TCP or UDP
packet whose source is in a rule's prefix and whose destination port is the rule's
port is dropped with acl_deny.  The rules are tables.yaml's rows (tables["acl"])."""

from npkit.emulator.traffic.model import ipv4_fields, rule

TCP, UDP = 6, 17


@rule(after="no_route", drop="acl_deny")
def acl(frame, tables):
    f = ipv4_fields(frame)
    if f is None or not f.first_fragment or f.proto not in (TCP, UDP):
        return False
    return any(r["src"].matches(f.src) and r["dport"] == f.dport for r in tables["acl"])
