#!/usr/bin/python3
"""check_pcap.py PCAP — every frame of a `uroce capture` file, independently of uroce.

Each frame must be Ethernet/IPv4/UDP to port 4791 whose ICRC scapy (scapy.contrib.roce,
BTH.compute_icrc over the frame's own IP header) recomputes to the trailing 4 bytes.
Prints one summary line: packets, ICRC ok/bad, the largest UDP payload, the number of
frames with a non-zero IPv4 Identification (GSO segments after the first).
Exit 0 if every frame is such a packet with a good ICRC, 1 otherwise.
"""
import sys

from scapy.all import IP, UDP, raw, rdpcap
from scapy.contrib.roce import BTH

n = bad = other = ids = 0
biggest = 0
for i, pkt in enumerate(rdpcap(sys.argv[1])):
    if IP not in pkt or UDP not in pkt or pkt[UDP].dport != 4791:
        other += 1
        continue
    n += 1
    ip = IP(raw(pkt[IP]))   # re-dissected so that BTH is bound under UDP 4791
    payload = raw(ip[UDP].payload)
    biggest = max(biggest, len(payload))
    if ip.id:
        ids += 1
    if BTH not in ip or ip[BTH].compute_icrc(None) != payload[-4:]:
        bad += 1
        if bad <= 5:
            print("frame %d: bad ICRC" % (i + 1))
print("packets %d icrc_ok %d icrc_bad %d other %d max_payload %d nonzero_ipid %d"
      % (n, n - bad, bad, other, biggest, ids))
sys.exit(0 if n and not bad and not other else 1)
