/* icrc.c — RoCEv2 ICRC (RoCEv2 Annex A17.3.3; IBA 7.8.1 for the CRC itself).
 *
 * The CRC is CRC-32/IEEE exactly as zlib's crc32(); ISA-L's crc32_gzip_refl()
 * computes the same function (chaining included) at memory speed.  The masked
 * IP/UDP/BTH prefix (at most 8 + 60 + 8 + 12 bytes) is assembled on the stack
 * and the rest of the packet is CRC'd in place.
 *
 * Receive without the IP header (docs/wire.md "ICRC on receive"): the ICRC
 * covers the IPv4 Identification, which a UDP socket does not report.  CRC-32
 * is affine over GF(2): for equal-length messages crc(A) ^ crc(B) = L(A ^ B),
 * L being the zero-init, no-xorout CRC.  Flipping the ID bits by `id` changes
 * the ICRC by U(id) * x^(8T) mod P, where U is the 16 -> 32 bit linear map of
 * the two ID bytes and T the number of bytes after them.  So with
 *     delta = icrc(ID 0) ^ received,   d = delta * x^(-8T) mod P
 * the packet is consistent iff d lies in the image of U, and then id = U^-1(d)
 * (U is injective: CRC-32 detects every error burst of <= 32 bits).  The
 * reduced basis of U's image and x^(-8*2^k) are computed once at load time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <isa-l/crc.h>

#include "wire/icrc.h"
#include "wire/wire.h"

#define CRC32_POLY_REFL 0xEDB88320u /* x^32 + x^26 + ... + 1, bit-reversed, x^32 implicit */
#define X0 0x80000000u              /* the polynomial 1 in reflected form */

#define IPV4_HLEN 20
#define IPV6_HLEN 40
#define UDP_HLEN 8
#define IPV4_DF 0x40                /* in byte 6 of the IPv4 header */
#define IPV4_ID_OFF 4
#define MIN_PKT (UROCE_BTH_LEN + UROCE_ICRC_LEN)

/*
 * ISA-L's AVX-512 CRC (crc32_gzip_refl_by16_10, chosen at run time on CPUs that have it)
 * returns without VZEROUPPER: the upper halves of the vector registers stay "dirty", and
 * every legacy-SSE instruction the compiler emits afterwards (struct copies, memset of a
 * few bytes) then pays a state-transition penalty.  Measured here: a 4 KiB CRC followed by
 * a little SSE code took 305 ns per packet, 82 ns with a VZEROUPPER after the CRC (a
 * quarter of both CPUs of the write_bw benchmark went there).  So we clear the upper state
 * ourselves when the CPU has AVX (VZEROUPPER faults without it).  All vector registers are
 * call-clobbered in the SysV ABI, and the asm names them as clobbered, so no live value is
 * lost; noinline keeps it a real call boundary for the callers too.
 */
static bool have_avx;

__attribute__((noinline)) uint32_t uroce_crc32(uint32_t crc, const void *buf, size_t len)
{
	crc = crc32_gzip_refl(crc, (const unsigned char *)buf, len);
#if defined(__x86_64__)
	if (have_avx)
		__asm__ volatile("vzeroupper" ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",
				 "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
				 "xmm14", "xmm15");
#endif
	return crc;
}

/* ---------------------------------------------------------------------------
 * Building the masked prefix.  Returns its length.
 */
static size_t put_ff8(uint8_t *b)
{
	memset(b, 0xFF, 8); /* RoCEv2 A17.3.3: stands in for the (absent) LRH */
	return 8;
}

/*
 * The masked prefix is assembled in a stack buffer and CRC'd by ISA-L like the rest.  An
 * earlier version fed it from registers through slice-by-4 tables because the buffer
 * seemed to cost ~190 ns per packet (store forwarding); that figure was most likely the
 * missing VZEROUPPER above (the byte stores here are legacy SSE/scalar code right after
 * the previous packet's AVX-512 CRC).  With it fixed, the 44 dependent table lookups were
 * the slower on the data path, whose copies push the tables out of L1 between packets:
 * ~25 ns more per call with a 4 KiB CRC and a 16 KiB copy between calls (and the send
 * path's profile showed the table version at 3.6 % against the buffer's 1.0 %).
 *
 * The part before the BTH (8 ones, the IP and UDP headers) depends only on the addresses,
 * the ports, the length and, over IPv4, the Identification.  CRC-32 is affine, so for
 * messages of equal length crc(A) ^ crc(B) = L(A ^ B), L being the zero-init, no-xorout
 * CRC: the prefix's CRC is that of the prefix with both length fields and the ID zero (the
 * "base", a function of the addresses and ports alone) xor L of each field's bytes in its
 * place, read from tables built at load time (a byte and the fixed number of bytes that
 * follow it up to the BTH: len_lin for the lengths, id_lin for the ID).  A caller that
 * sends or receives a stream keeps the base (netio: per destination and per source) and
 * passes it to the _base calls; the others get it from a per-thread memo (pre_memo),
 * keyed by every input, so a hit is exactly the value a computation would give.
 */
static uint32_t id_lin[2][256];
/* [field][byte of the big-endian 16-bit value][value]: the UDP length, the IPv4 total
 * length, the IPv6 payload length. */
enum { LEN_UDP, LEN_IP4, LEN_IP6 };
static uint32_t len_lin[3][2][256];

/* The prefix before the BTH with both length fields and the Identification zero. */
static size_t put_base(uint8_t *pre, const struct uroce_icrc_addr *a)
{
	size_t n = put_ff8(pre);

	if (a->family == AF_INET6) {
		pre[n] = 0x6F;                          /* version 6, traffic class ones */
		memset(pre + n + 1, 0xFF, 3);           /* traffic class, flow label */
		uroce_put_be16(pre + n + 4, 0);         /* payload length: applied by with_len */
		pre[n + 6] = IPPROTO_UDP;
		pre[n + 7] = 0xFF;                      /* hop limit */
		memcpy(pre + n + 8, a->src.v6.s6_addr, 16);
		memcpy(pre + n + 24, a->dst.v6.s6_addr, 16);
		n += IPV6_HLEN;
	} else {
		pre[n] = 0x45;
		pre[n + 1] = 0xFF;                      /* TOS */
		uroce_put_be16(pre + n + 2, 0);         /* total length: applied by with_len */
		uroce_put_be16(pre + n + 4, 0);         /* Identification: uroce_icrc_with_id */
		pre[n + 6] = IPV4_DF;                   /* DF, offset 0 */
		pre[n + 7] = 0;
		pre[n + 8] = 0xFF;                      /* TTL */
		pre[n + 9] = IPPROTO_UDP;
		pre[n + 10] = pre[n + 11] = 0xFF;       /* header checksum */
		memcpy(pre + n + 12, &a->src.v4, 4);
		memcpy(pre + n + 16, &a->dst.v4, 4);
		n += IPV4_HLEN;
	}
	uroce_put_be16(pre + n, a->sport);
	uroce_put_be16(pre + n + 2, a->dport);
	uroce_put_be16(pre + n + 4, 0);                 /* length: applied by with_len */
	pre[n + 6] = pre[n + 7] = 0xFF;                 /* UDP checksum */
	return n + UDP_HLEN;
}

/* The base with the length fields of a @len-byte UDP payload (16 bits, as on the wire). */
static inline uint32_t with_len(uint32_t base, int family, size_t len)
{
	uint16_t udp = (uint16_t)(UDP_HLEN + len);
	uint16_t ip = family == AF_INET6 ? udp : (uint16_t)(IPV4_HLEN + udp);
	int f = family == AF_INET6 ? LEN_IP6 : LEN_IP4;

	return base ^ len_lin[LEN_UDP][0][udp >> 8] ^ len_lin[LEN_UDP][1][udp & 0xFF] ^
	       len_lin[f][0][ip >> 8] ^ len_lin[f][1][ip & 0xFF];
}

/* 16 sets of 2 ways.  A ping-pong's thread uses two keys (one each way; four when the
 * length was in the key), a stream a few more.  The first memo was direct-mapped, 16 entries, and in about a third of the
 * runs two of a ping-pong's keys shared an entry and evicted each other at every packet
 * (the UDP source ports, in the key, change from run to run): bench/instr.sh then counted
 * 121 or 242 more instructions a hop, all in the fill.  Two ways keep any two keys of a
 * set; three of four keys in one set is left to chance (1.5% of runs).  The second way's
 * compare costs 16 instructions a hop on the hits (5,278 against 5,262; four ways with a
 * hash tag compared first cost 37). */
#define PRE_MEMO_SET_BITS 4
#define PRE_MEMO_WAYS 2
#define PRE_MEMO ((1u << PRE_MEMO_SET_BITS) * PRE_MEMO_WAYS)

/* A memo key: the addresses as 16 bytes each (an IPv4 one in the first 4, the rest 0),
 * the ports and the family, compared as words. */
struct pre_key {
	uint64_t w[4];          /* source, destination */
	uint64_t x;             /* sport | dport << 16 */
	uint64_t family;
};

struct pre_memo {
	struct pre_key k;       /* family 0: empty */
	uint32_t crc;           /* the base */
};

/* A thread's memo: the entries, and the way each set replaces next (round robin). */
struct pre_memo_block {
	struct pre_memo e[PRE_MEMO];
	uint8_t next[1u << PRE_MEMO_SET_BITS];
	unsigned long misses;   /* for the tests (uroce_icrc_memo_misses) */
};

/* Each thread's memo is allocated at its first use and freed when it exits (memo_key's
 * destructor): 2 KiB of thread-local storage would take most of the static TLS that
 * glibc keeps for libraries loaded with dlopen (UCX loads its verbs transport that way),
 * and a dlopen that finds too little fails.  So only the pointer is initial-exec. */
static __thread __attribute__((tls_model("initial-exec"))) struct pre_memo_block *pre_memo_of;
static pthread_key_t memo_key;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static bool memo_key_ok;

/* At the thread's exit: the pointer goes too, so that an ICRC computed later in the exit
 * (another key's destructor) allocates again rather than use freed memory. */
static void memo_free(void *p)
{
	pre_memo_of = NULL;
	free(p);
}

static void memo_key_init(void)
{
	memo_key_ok = pthread_key_create(&memo_key, memo_free) == 0;
}

static struct pre_memo_block *memo_get(void)
{
	if (!pre_memo_of) {
		pthread_once(&memo_once, memo_key_init);
		if (!memo_key_ok)
			return NULL;
		pre_memo_of = calloc(1, sizeof(*pre_memo_of));
		if (pre_memo_of && pthread_setspecific(memo_key, pre_memo_of)) {
			free(pre_memo_of);
			pre_memo_of = NULL;
		}
	}
	return pre_memo_of;
}

unsigned long uroce_icrc_memo_misses(void)
{
	return pre_memo_of ? pre_memo_of->misses : 0;
}

/* A memo miss (or no memo, @m NULL): compute and remember (apart, so the hit path has no
 * stack buffer to guard). */
static __attribute__((noinline)) uint32_t base_fill(struct pre_memo *m, const struct pre_key *k,
						    const struct uroce_icrc_addr *a)
{
	uint8_t pre[8 + IPV6_HLEN + UDP_HLEN];
	uint32_t crc = uroce_crc32(0, pre, put_base(pre, a));

	if (m) {
		m->crc = crc;
		m->k = *k;
	}
	return crc;
}

uint32_t uroce_icrc_base(const struct uroce_icrc_addr *a)
{
	struct pre_key k = { .x = (uint64_t)a->sport | (uint64_t)a->dport << 16,
			     .family = (uint64_t)(unsigned)a->family };
	struct pre_memo_block *b = memo_get();
	struct pre_memo *set;
	uint64_t h;
	unsigned set_no;

	if (a->family == AF_INET6) {
		memcpy(&k.w[0], a->src.v6.s6_addr, 16);
		memcpy(&k.w[2], a->dst.v6.s6_addr, 16);
	} else {
		uint32_t v;

		memcpy(&v, &a->src.v4, 4);
		k.w[0] = v;
		memcpy(&v, &a->dst.v4, 4);
		k.w[2] = v;
	}
	if (!b)
		return base_fill(NULL, &k, a);
	h = (k.x ^ k.w[0] ^ k.w[1] * 3 ^ k.w[2] * 5 ^ k.w[3] * 7) * 0x9E3779B97F4A7C15ull;
	set_no = (unsigned)(h >> (64 - PRE_MEMO_SET_BITS));
	set = &b->e[set_no * PRE_MEMO_WAYS];
	for (unsigned w = 0; w < PRE_MEMO_WAYS; w++) {
		struct pre_memo *m = &set[w];

		if (m->k.x == k.x && m->k.w[0] == k.w[0] && m->k.w[2] == k.w[2] &&
		    m->k.w[1] == k.w[1] && m->k.w[3] == k.w[3] && m->k.family == k.family)
			return m->crc;
	}
	b->misses++;
	return base_fill(&set[b->next[set_no]++ % PRE_MEMO_WAYS], &k, a);
}

static inline uint32_t with_id(uint32_t pre, int family, uint16_t ip_id)
{
	if (ip_id && family != AF_INET6)
		pre ^= id_lin[0][ip_id >> 8] ^ id_lin[1][ip_id & 0xFF];
	return pre;
}

static inline uint32_t pre_base(uint32_t base, int family, uint16_t ip_id, size_t len)
{
	return with_id(with_len(base, family, len), family, ip_id);
}

uint32_t uroce_icrc_with_id(uint32_t pre, int family, uint16_t ip_id)
{
	return with_id(pre, family, ip_id);
}

uint32_t uroce_icrc_pre_base(uint32_t base, int family, uint16_t ip_id, size_t len)
{
	return pre_base(base, family, ip_id, len);
}

uint32_t uroce_icrc_pre(const struct uroce_icrc_addr *a, uint16_t ip_id, size_t len)
{
	return pre_base(uroce_icrc_base(a), a->family, ip_id, len);
}

uint32_t uroce_icrc_head(const struct uroce_icrc_addr *a, uint16_t ip_id, const uint8_t *bth,
			 size_t len)
{
	uint8_t b[UROCE_BTH_LEN];

	memcpy(b, bth, UROCE_BTH_LEN);
	b[4] = 0xFF;                                    /* BTH byte 4 */
	return uroce_crc32(uroce_icrc_pre(a, ip_id, len), b, UROCE_BTH_LEN);
}

/* The ICRC of a contiguous packet (@len >= MIN_PKT) for @ip_id.  ISA-L costs about the
 * same per call for any length up to 64 bytes (50-80 instructions, more below 16), so a
 * small packet is CRC'd in one call from a masked copy.  A larger one in two: its masked
 * BTH, then the rest in place -- from right after the BTH, where a payload of whole
 * 64-byte blocks leaves ISA-L no tail to finish byte by byte: a 4 KiB packet's ICRC ran at
 * 33.6 GB/s with the first 16, 32, 48 or 64 bytes in the first call, 40.4 with 12
 * (icrc_bench). */
static uint32_t icrc_of(uint32_t base, int family, uint16_t ip_id, const uint8_t *pkt, size_t len)
{
	size_t n = len - UROCE_ICRC_LEN;
	uint32_t pre = pre_base(base, family, ip_id, len);

	if (n <= UROCE_ICRC_SMALL) {
		uint8_t b[UROCE_ICRC_SMALL];

		memcpy(b, pkt, n);
		b[4] = 0xFF;                            /* BTH byte 4 */
		return uroce_crc32(pre, b, n);
	}
	{
		uint8_t b[UROCE_BTH_LEN];

		memcpy(b, pkt, UROCE_BTH_LEN);
		b[4] = 0xFF;                            /* BTH byte 4 */
		pre = uroce_crc32(pre, b, UROCE_BTH_LEN);
	}
	return uroce_crc32(pre, pkt + UROCE_BTH_LEN, n - UROCE_BTH_LEN);
}

uint32_t uroce_icrc_compute(const struct uroce_icrc_addr *a, const uint8_t *pkt, size_t len)
{
	if (len < MIN_PKT)
		return 0;
	return icrc_of(uroce_icrc_base(a), a->family, 0, pkt, len);
}

void uroce_icrc_set(const struct uroce_icrc_addr *a, uint8_t *pkt, size_t len)
{
	if (len >= MIN_PKT)
		uroce_put_le32(pkt + len - UROCE_ICRC_LEN, uroce_icrc_compute(a, pkt, len));
}

int uroce_icrc_frame(int family, const uint8_t *ip, size_t ip_len, const uint8_t *udp,
		     const uint8_t *pkt, size_t len, uint32_t *icrc)
{
	uint8_t pre[8 + 60 + UDP_HLEN + UROCE_BTH_LEN];
	size_t n;
	uint32_t crc;

	if (len < MIN_PKT)
		return -EINVAL;
	n = put_ff8(pre);
	if (family == AF_INET) {
		if (ip_len < IPV4_HLEN || ip_len > 60)
			return -EINVAL;
		memcpy(pre + n, ip, ip_len);
		pre[n + 1] = 0xFF;
		pre[n + 8] = 0xFF;
		pre[n + 10] = pre[n + 11] = 0xFF;
		n += ip_len;
	} else if (family == AF_INET6) {
		if (ip_len != IPV6_HLEN)
			return -EPROTONOSUPPORT; /* extension headers: not covered here */
		memcpy(pre + n, ip, ip_len);
		pre[n] |= 0x0F;
		pre[n + 1] = pre[n + 2] = pre[n + 3] = 0xFF;
		pre[n + 7] = 0xFF;
		n += ip_len;
	} else {
		return -EINVAL;
	}
	memcpy(pre + n, udp, 6);
	pre[n + 6] = pre[n + 7] = 0xFF;
	memcpy(pre + n + UDP_HLEN, pkt, UROCE_BTH_LEN);
	pre[n + UDP_HLEN + 4] = 0xFF;
	n += UDP_HLEN + UROCE_BTH_LEN;
	crc = uroce_crc32(0, pre, n);
	*icrc = uroce_crc32(crc, pkt + UROCE_BTH_LEN, len - UROCE_BTH_LEN - UROCE_ICRC_LEN);
	return 0;
}

bool uroce_icrc_frame_ok(int family, const uint8_t *ip, size_t ip_len, const uint8_t *udp,
			 const uint8_t *pkt, size_t len)
{
	uint32_t c;

	return uroce_icrc_frame(family, ip, ip_len, udp, pkt, len, &c) == 0 &&
	       c == uroce_get_le32(pkt + len - UROCE_ICRC_LEN);
}

/* ---------------------------------------------------------------------------
 * GF(2)[x] mod P in the reflected representation (bit 31 = x^0, bit 0 = x^31).
 */
/* Division by x: x is invertible mod P because P(0) = 1.  Multiplying by x
 * (r >> 1, then xor P if bit 0 fell off) xors the
 * polynomial (whose x^0 bit is bit 31) exactly when it reduced, and r >> 1
 * never has bit 31, so bit 31 of the product tells which case happened. */
static uint32_t div_x(uint32_t s)
{
	return (s & X0) ? ((s ^ CRC32_POLY_REFL) << 1) | 1u : s << 1;
}

static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t r = 0;

	for (int i = 31; i >= 0; i--) {
		r ^= b & (0u - ((a >> i) & 1u));  /* coefficient of x^(31-i) */
		b = (b >> 1) ^ (CRC32_POLY_REFL & (0u - (b & 1u)));
	}
	return r;
}

/* The CRC of a short message (at most 64 bytes) with zero init and no final xor (the
 * linear part). */
static uint32_t crc_lin(const uint8_t *m, size_t n)
{
	static const uint8_t zeros[64];

	return uroce_crc32(0, m, n) ^ uroce_crc32(0, zeros, n);
}

static struct {
	uint32_t xinv8[64];     /* x^(-8 * 2^k) mod P */
	uint32_t vec[16];       /* fully reduced basis of U's image */
	uint16_t comb[16];      /* which ID bits each basis vector is made of */
	uint32_t piv[16];       /* pivot bit of each vector (set in no other vector) */
	uint32_t df;            /* the DF bit's contribution, in the same (shifted) frame */
	int ok;
} solver;

__attribute__((constructor)) static void solver_init(void)
{
	uint32_t v = X0;
	int n = 0;

#if defined(__x86_64__)
	__builtin_cpu_init();   /* constructors may run before libgcc's own */
	have_avx = __builtin_cpu_supports("avx");
#endif
	/* The ID's share of the prefix CRC (uroce_icrc_with_id): each ID byte, the other one zero, with
	 * the 22 bytes that follow it up to the BTH. */
	for (int byte = 0; byte < 256; byte++) {
		uint8_t m[2 + IPV4_HLEN - IPV4_ID_OFF - 2 + UDP_HLEN] = { 0 };

		m[0] = (uint8_t)byte;
		id_lin[0][byte] = crc_lin(m, sizeof(m));
		m[0] = 0;
		m[1] = (uint8_t)byte;
		id_lin[1][byte] = crc_lin(m, sizeof(m));
	}

	/* The lengths' shares (with_len): each byte of each field, followed by the bytes after
	 * it up to the BTH: 3 and 2 after the UDP length's, 25 and 24 after the IPv4 total
	 * length's (IPv4 bytes 4..19, the UDP header), 43 and 42 after the IPv6 payload
	 * length's (IPv6 bytes 6..39, the UDP header). */
	{
		static const uint8_t after[3] = { 3, 25, 43 };

		for (int f = 0; f < 3; f++)
			for (int k = 0; k < 2; k++)     /* the high byte, then the low */
				for (int byte = 0; byte < 256; byte++) {
					uint8_t m[1 + 43] = { 0 };

					m[0] = (uint8_t)byte;
					len_lin[f][k][byte] = crc_lin(m, 1u + after[f] - (unsigned)k);
				}
	}
	for (int i = 0; i < 8; i++)
		v = div_x(v);
	solver.xinv8[0] = v;
	for (int k = 1; k < 64; k++)
		solver.xinv8[k] = gf2_mulmod(solver.xinv8[k - 1], solver.xinv8[k - 1]);

	for (int i = 0; i < 16; i++) {
		uint8_t id[2];
		uint16_t c = (uint16_t)(1u << i);

		uroce_put_be16(id, c);
		v = crc_lin(id, 2);
		for (int j = 0; j < n; j++)
			if (v & solver.piv[j]) {
				v ^= solver.vec[j];
				c ^= solver.comb[j];
			}
		if (!v)
			return; /* cannot happen (burst <= 32 bits); solver stays disabled */
		uint32_t p = 1u << (31 - __builtin_clz(v));
		for (int j = 0; j < n; j++)
			if (solver.vec[j] & p) {
				solver.vec[j] ^= v;
				solver.comb[j] ^= c;
			}
		solver.vec[n] = v;
		solver.comb[n] = c;
		solver.piv[n] = p;
		n++;
	}
	/* DF sits in the byte after the ID: one byte less of shift than the ID. */
	{
		uint8_t b = IPV4_DF;
		solver.df = gf2_mulmod(crc_lin(&b, 1), solver.xinv8[0]);
	}
	solver.ok = 1;
}

/* x^(-8n) mod P for n < UNSHIFT_CACHE, filled on first use per length (a
 * power of a unit is never 0, so 0 means "not yet").  Relaxed atomics: racing
 * threads compute and store the same value. */
#define UNSHIFT_CACHE 16384
static _Atomic uint32_t unshift_pow[UNSHIFT_CACHE];

static uint32_t xinv8_pow(uint64_t n)
{
	uint32_t r = X0, cached = 0;

	if (n < UNSHIFT_CACHE) {
		cached = atomic_load_explicit(&unshift_pow[n], memory_order_relaxed);
		if (cached)
			return cached;
	}
	for (int k = 0; n >> k && k < 64; k++)
		if ((n >> k) & 1)
			r = gf2_mulmod(r, solver.xinv8[k]);
	if (n < UNSHIFT_CACHE)
		atomic_store_explicit(&unshift_pow[n], r, memory_order_relaxed);
	return r;
}

/* d * x^(-8n) mod P. */
static uint32_t unshift_bytes(uint32_t d, uint64_t n)
{
	return gf2_mulmod(d, xinv8_pow(n));
}

/* Solve U(id) = d; returns 0 and *id, or -1 if d is not in U's image. */
static int solve_id(uint32_t d, uint16_t *id)
{
	uint16_t r = 0;

	for (int j = 0; j < 16; j++)
		if (d & solver.piv[j]) {
			d ^= solver.vec[j];
			r ^= solver.comb[j];
		}
	if (d)
		return -1;
	*id = r;
	return 0;
}

static enum uroce_icrc_status verify_hint(const struct uroce_icrc_addr *a, uint32_t base,
					  const uint8_t *pkt, size_t len, unsigned flags,
					  uint16_t id_hint, uint16_t *ip_id)
{
	uint32_t rx, delta, d;
	uint16_t id;

	if (len < MIN_PKT)
		return UROCE_ICRC_BAD;
	if (a->family != AF_INET)
		id_hint = 0;   /* no Identification in IPv6 */
	rx = uroce_get_le32(pkt + len - UROCE_ICRC_LEN);
	delta = icrc_of(base, a->family, id_hint, pkt, len) ^ rx;
	if (!delta) {
		if (ip_id)
			*ip_id = id_hint;
		return id_hint ? UROCE_ICRC_OK_ID : UROCE_ICRC_OK;
	}
	if (a->family != AF_INET || !(flags & UROCE_ICRC_RX_SOLVE_ID) || !solver.ok)
		return UROCE_ICRC_BAD;
	/* Bytes after the ID field: IPv4 bytes 6..19, UDP header, BTH..pad.  delta is
	 * relative to the hinted ID, so the solution is the difference from it. */
	d = unshift_bytes(delta, (IPV4_HLEN - IPV4_ID_OFF - 2) + UDP_HLEN + (len - UROCE_ICRC_LEN));
	if (solve_id(d, &id) == 0 ||
	    ((flags & UROCE_ICRC_RX_DF_ANY) && solve_id(d ^ solver.df, &id) == 0)) {
		if (ip_id)
			*ip_id = id ^ id_hint;
		return UROCE_ICRC_OK_ID;
	}
	return UROCE_ICRC_BAD;
}

enum uroce_icrc_status uroce_icrc_verify_hint(const struct uroce_icrc_addr *a, const uint8_t *pkt,
					      size_t len, unsigned flags, uint16_t id_hint,
					      uint16_t *ip_id)
{
	return verify_hint(a, uroce_icrc_base(a), pkt, len, flags, id_hint, ip_id);
}

enum uroce_icrc_status uroce_icrc_verify(const struct uroce_icrc_addr *a, const uint8_t *pkt,
					 size_t len, unsigned flags, uint16_t *ip_id)
{
	return uroce_icrc_verify_hint(a, pkt, len, flags, 0, ip_id);
}

/* ---------------------------------------------------------------------------
 * Receive with what is known of the sender (icrc.h, docs/wire.md "Which Identifications a
 * receiver accepts").
 */
#define PEER_WAYS 4
#define PEER_SETS (UROCE_ICRC_PEERS / PEER_WAYS)
_Static_assert((PEER_SETS & (PEER_SETS - 1)) == 0, "the peer table has a power-of-two number of sets");

static struct uroce_icrc_peer *peer_set(struct uroce_icrc_rx *rx, uint32_t src, uint32_t dst)
{
	uint32_t h = (src ^ (dst * 0x9E3779B1u)) * 0x85EBCA6Bu;

	return &rx->peer[((h >> 16) & (PEER_SETS - 1)) * PEER_WAYS];
}

/* How far past an ID the next one of a Linux sender may be, @ns apart: the jiffies' random
 * jump is below 1 per ms; the rest is the sender's other packets in between (to other
 * receivers whose address pair hashes to the same counter, or to other processes here),
 * bounded by one per UROCE_ICRC_ID_NS.  From 65 ms apart on, every ID but the last. */
static uint32_t id_window(uint64_t ns)
{
	uint64_t w = UROCE_ICRC_ID_WINDOW + ns / UROCE_ICRC_ID_NS;

	return w > 0xFFFF ? 0xFFFF : (uint32_t)w;
}

/* @id is 1..@w after @from (mod 2^16). */
static bool id_after(uint16_t id, uint16_t from, uint32_t w)
{
	uint16_t d = (uint16_t)(id - from);

	return d >= 1 && d <= w;
}

static uint64_t since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/* *now, read from CLOCK_MONOTONIC if the caller has not (never 0: 0 marks a free slot). */
static uint64_t clock_ns(uint64_t *now)
{
	if (!*now) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		*now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
	return *now ? *now : 1;
}

enum uroce_icrc_status uroce_icrc_rx_check(struct uroce_icrc_rx *rx, const struct uroce_icrc_addr *a,
					   const uint8_t *pkt, size_t len, uint16_t id_hint,
					   uint64_t *now, uint16_t *ip_id)
{
	return uroce_icrc_rx_check_base(rx, a, uroce_icrc_base(a), pkt, len, id_hint, now, ip_id);
}

enum uroce_icrc_status uroce_icrc_rx_check_base(struct uroce_icrc_rx *rx,
						const struct uroce_icrc_addr *a, uint32_t base,
						const uint8_t *pkt, size_t len, uint16_t id_hint,
						uint64_t *now, uint16_t *ip_id)
{
	struct uroce_icrc_peer *set, *p = NULL;
	enum uroce_icrc_status st;
	uint32_t src, dst, qpn;
	uint16_t id = 0;
	bool ok, fwd = false, back = false, uroce;
	int run = -1;

	if (ip_id)
		*ip_id = 0;
	st = verify_hint(a, base, pkt, len, UROCE_ICRC_RX_SOLVE_ID, id_hint, &id);
	if (st == UROCE_ICRC_BAD || a->family != AF_INET)
		return st;
	if (ip_id)
		*ip_id = id;
	st = id ? UROCE_ICRC_OK_ID : UROCE_ICRC_OK;
	if (rx->any_id)
		return st;

	memcpy(&src, &a->src.v4, 4);
	memcpy(&dst, &a->dst.v4, 4);
	qpn = (uroce_get_be32(pkt + 4) & 0xFFFFFFu) | 1u << 31;  /* BTH DestQP (len >= 16) */
	/* The sender of the last packet first: a stream's packets come from one.  A sender
	 * is in one way of its set at most (a new one is placed only when none matched). */
	if (rx->last_peer) {
		struct uroce_icrc_peer *q = &rx->peer[rx->last_peer - 1];

		if (q->last_ns && q->src == src && q->dst == dst)
			p = q;
	}
	if (!p) {
		set = peer_set(rx, src, dst);
		for (int w = 0; w < PEER_WAYS && !p; w++)
			if (set[w].last_ns && set[w].src == src && set[w].dst == dst)
				p = &set[w];
	}
	if (!p) {
		/* Never seen (or forgotten): any ID.  Take a free way, else the one that has
		 * gone the most packets without one accepted. */
		p = &set[0];
		for (int w = 1; w < PEER_WAYS && p->last_ns; w++)
			if (!set[w].last_ns || rx->tick - set[w].used > rx->tick - p->used)
				p = &set[w];
		memset(p, 0, sizeof(*p));
		p->src = src;
		p->dst = dst;
		p->zeros = id == 0;
		p->last = id;
		p->last_ns = clock_ns(now);
		goto accepted;
	}

	for (int r = 0; r < UROCE_ICRC_RUNS; r++)
		if (p->runs[r].qpn == qpn && p->runs[r].sport == a->sport) {
			run = r;    /* a run is in one slot at most (placed when none matched) */
			break;
		}
	/* What uroce sends: ID 0 (single packets), k for segment k of a GSO send, which is
	 * either its index in our GRO buffer or the one after the previous segment. */
	uroce = id == 0 || id == id_hint || (run >= 0 && id == p->runs[run].next);
	if (p->zeros >= 2) {
		ok = uroce;     /* a uroce sender: never solved for another ID again */
	} else {
		uint64_t t = clock_ns(now);

		fwd = id_after(id, p->last, id_window(since(t, p->last_ns)));
		/* Up to UROCE_ICRC_ID_BACK behind the newest, or the newest again (a packet
		 * the network reordered or duplicated). */
		back = id == p->last || id_after(p->last, id, UROCE_ICRC_ID_BACK);
		ok = uroce || fwd || back ||
		     (p->misses && id_after(id, p->miss, id_window(since(t, p->miss_ns))));
	}
	if (!ok) {
		if (p->zeros < 2) {
			if (p->misses < 255)
				p->misses++;
			p->miss = id;
			p->miss_ns = clock_ns(now);
		}
		return UROCE_ICRC_BAD_ID;
	}
	/* An ID 0 that Linux's counter does not explain (it was not due): a uroce sender,
	 * once it happened twice (the first packet of a sender counts). */
	if (id == 0 && !fwd && p->zeros < 2)
		p->zeros++;
	/* A reordered packet (behind the newest) does not take the newest's place. */
	if (fwd || !back)
		p->last = id;
	if (p->zeros < 2)
		p->last_ns = clock_ns(now);
	p->misses = 0;
accepted:
	p->used = ++rx->tick;
	rx->last_peer = (uint16_t)(p - rx->peer + 1);
	/* The run this packet continues (or starts), for the next segment after it. */
	if (run < 0) {
		run = p->run_rr;
		p->run_rr = (uint8_t)((p->run_rr + 1) % UROCE_ICRC_RUNS);
		p->runs[run].qpn = qpn;
		p->runs[run].sport = a->sport;
	}
	p->runs[run].next = (uint16_t)(id + 1);
	return st;
}
