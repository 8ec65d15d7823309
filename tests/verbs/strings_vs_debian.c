/* strings_vs_debian.c — the enum strings and rate conversions of our library
 * against Debian's libibverbs (loaded in its own link-map namespace with dlmopen,
 * so both coexist).  A missing Debian library is a failure. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "vt.h"

#define SYSLIB "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"

int main(void)
{
	void *h = dlmopen(LM_ID_NEWLM, SYSLIB, RTLD_NOW | RTLD_LOCAL);
	const char *(*wc)(int), *(*ev)(int), *(*node)(int), *(*port)(int);
	int (*r2m)(int), (*m2r)(int), (*r2mbps)(int), (*mbps2r)(int);

	if (!h) {
		printf("FAIL: Debian's libibverbs (package libibverbs1): %s\n", dlerror());
		return 1;
	}
	wc = (const char *(*)(int))dlsym(h, "ibv_wc_status_str");
	ev = (const char *(*)(int))dlsym(h, "ibv_event_type_str");
	node = (const char *(*)(int))dlsym(h, "ibv_node_type_str");
	port = (const char *(*)(int))dlsym(h, "ibv_port_state_str");
	r2m = (int (*)(int))dlsym(h, "ibv_rate_to_mult");
	m2r = (int (*)(int))dlsym(h, "mult_to_ibv_rate");
	r2mbps = (int (*)(int))dlsym(h, "ibv_rate_to_mbps");
	mbps2r = (int (*)(int))dlsym(h, "mbps_to_ibv_rate");
	CHECK(wc && ev && node && port && r2m && m2r && r2mbps && mbps2r);
	for (int i = -2; i < 64; i++) {
		CHECK(!strcmp(ibv_wc_status_str((enum ibv_wc_status)i), wc(i)));
		CHECK(!strcmp(ibv_event_type_str((enum ibv_event_type)i), ev(i)));
		CHECK(!strcmp(ibv_node_type_str((enum ibv_node_type)i), node(i)));
		CHECK(!strcmp(ibv_port_state_str((enum ibv_port_state)i), port(i)));
		CHECK(ibv_rate_to_mult((enum ibv_rate)i) == r2m(i));
		CHECK(ibv_rate_to_mbps((enum ibv_rate)i) == r2mbps(i));
	}
	for (int m = -1; m < 600; m++)
		CHECK((int)mult_to_ibv_rate(m) == m2r(m));
	for (int i = -2; i < 64; i++) {
		int mbps = r2mbps(i);

		CHECK((int)mbps_to_ibv_rate(mbps) == mbps2r(mbps));
		CHECK((int)mbps_to_ibv_rate(mbps + 1) == mbps2r(mbps + 1));
	}
	return vt_done("verbs_strings");
}
