#!/bin/sh
# ns_agent.sh [SSH-OPTIONS] HOST WORDS... — the ssh of mpirun (plm_rsh_agent) and of
# MPICH's hydra (-launcher-exec) for two network namespaces playing two hosts: runs the
# command in the namespace of HOST through `sh -c "WORDS..."`, as ssh runs a remote
# command.  Hosts: 192.0.2.1 = netns a, 192.0.2.2 = netns b (tests/ucx/ucx_apps.sh veth).
# Hydra puts ssh options (-x) before the host: they are skipped.
while [ $# -gt 0 ]; do
	case $1 in
	-*) shift ;;
	*) break ;;
	esac
done
host=$1
shift
case $host in
192.0.2.1) ns=a ;;
192.0.2.2) ns=b ;;
*) echo "ns_agent: no namespace plays host $host" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" sh -c "$*"
