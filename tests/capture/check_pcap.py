#!/usr/bin/python3
"""check_pcap.py PCAP — every frame of a `uroce capture` file, independently of uroce.

Each frame must be Ethernet/IPv4 or IPv6/UDP to port 4791 whose ICRC recomputes to the
trailing 4 bytes: over IPv4 by scapy (scapy.contrib.roce, BTH.compute_icrc over the frame's
own IP header); over IPv6, which scapy 2.5 does not do, with zlib's CRC-32 over the masked
headers of RoCEv2 Annex A17.3.3 (64 bits of ones for the LRH; the IPv6 traffic class, flow
label and hop limit, the UDP checksum and the BTH's reserved byte as ones).
Prints one summary line: packets, ICRC ok/bad, the largest UDP payload, the number of
frames with a non-zero IPv4 Identification (GSO segments after the first).
Exit 0 if every frame is such a packet with a good ICRC, 1 otherwise.
"""
import struct
import sys
import zlib

from scapy.all import IP, IPv6, UDP, raw, rdpcap
from scapy.contrib.roce import BTH


def icrc6(ip6):
    """A17.3.3 over IPv6: the ICRC the frame's headers and payload should carry."""
    h = bytearray(raw(ip6)[:40])
    h[0] |= 0x0F                     # traffic class, high nibble (low nibble of byte 0)
    h[1:4] = b"\xff\xff\xff"          # traffic class low nibble + flow label
    h[7] = 0xFF                      # hop limit
    payload = raw(ip6[UDP].payload)
    udp = bytearray(raw(ip6[UDP])[:8])
    udp[6:8] = b"\xff\xff"             # checksum
    bth = bytearray(payload[:12])
    bth[4] = 0xFF                    # resv8a
    data = b"\xff" * 8 + bytes(h) + bytes(udp) + bytes(bth) + payload[12:-4]
    return struct.pack("<I", zlib.crc32(data))


n = bad = other = ids = v6 = 0
biggest = 0
for i, pkt in enumerate(rdpcap(sys.argv[1])):
    if UDP not in pkt or pkt[UDP].dport != 4791 or (IP not in pkt and IPv6 not in pkt):
        other += 1
        continue
    n += 1
    if IPv6 in pkt:
        v6 += 1
        payload = raw(pkt[UDP].payload)
        biggest = max(biggest, len(payload))
        if len(payload) < 16 or icrc6(pkt[IPv6]) != payload[-4:]:
            bad += 1
            if bad <= 5:
                print("frame %d: bad ICRC (IPv6)" % (i + 1))
        continue
    ip = IP(raw(pkt[IP]))   # re-dissected so that BTH is bound under UDP 4791
    payload = raw(ip[UDP].payload)
    biggest = max(biggest, len(payload))
    if ip.id:
        ids += 1
    if BTH not in ip or ip[BTH].compute_icrc(None) != payload[-4:]:
        bad += 1
        if bad <= 5:
            print("frame %d: bad ICRC" % (i + 1))
print("packets %d icrc_ok %d icrc_bad %d other %d max_payload %d nonzero_ipid %d ipv6 %d"
      % (n, n - bad, bad, other, biggest, ids, v6))
sys.exit(0 if n and not bad and not other else 1)
