#!/bin/sh
# with_lib.sh LIBDIR CMD [ARGS...] — run an unmodified program against the drop-in
# libraries in LIBDIR.  An ASan build of them needs the ASan runtime preloaded into
# uninstrumented programs (leak checking off: the programs are not ours).
LIB=$1
shift
export LD_LIBRARY_PATH=$LIB
asan=$(ldd "$LIB/libibverbs.so.1" | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
	export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
fi
exec "$@"
