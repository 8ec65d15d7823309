# poll_empty: an empty ibv_poll_cq over the UDP path against a bare empty recvmmsg in the
# same process (bench/README.md).
uroce_verbs_bench(poll_empty)
