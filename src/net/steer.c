/* steer.c — the classic-BPF program that steers UDP 4791 by destination QPN (steer.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/steer.h"

#define BTH_LEN 12
#define BTH_DQPN_WORD 4   /* bytes 4..7: FECN, BECN, Resv6 | DestQP (IBA 9.2) */
#define MCAST_QPN 0xFFFFFF /* IBA 9.6.1.1, 10.5: the multicast QPN, nobody's own */

static int cmp_rule(const void *a, const void *b)
{
	const struct uroce_steer_rule *x = a, *y = b;
	return x->qpn_lo < y->qpn_lo ? -1 : x->qpn_lo > y->qpn_lo;
}

/*
 * Layout (A is the accumulator; jumps are relative to the next instruction; conditional
 * jumps reach at most 255 ahead, so every jump to DEFAULT is an unconditional "ja", whose
 * offset is 32 bits):
 *
 *   0: A = len                     datagram length after the UDP header
 *   1: if A >= 12 skip 1
 *   2: goto DEFAULT                no room for a BTH: let the daemon count it
 *   3: A = word[4]
 *   4: A &= 0xffffff               destination QPN
 *   5: if A != 0xffffff skip 1
 *   6: goto DEFAULT                the multicast QPN: no rule may claim it, even if the
 *                                  rule's block ends with it (docs/ud-uc.md, Multicast)
 *   per rule, sorted by qpn_lo (4 instructions):
 *      if A >= lo skip 1
 *      goto DEFAULT                below this rule, so below every later one too
 *      if A > hi skip 1            to the next rule
 *      return index
 *   DEFAULT: return default_index
 *
 * The kernel falls back to its hash when the returned index is out of range, so a stale
 * program can misdirect a datagram but never drop it.
 */
int uroce_steer_build(const struct uroce_steer_rule *rules, size_t n, uint16_t default_index,
		      struct sock_filter *prog, size_t cap)
{
	if (n > UROCE_STEER_MAX_RULES)
		return -E2BIG;
	size_t need = 7 + 4 * n + 1;
	if (need > cap || need > BPF_MAXINSNS)
		return -E2BIG;

	struct uroce_steer_rule *r = NULL;
	if (n) {
		r = malloc(n * sizeof(*r));
		if (!r)
			return -ENOMEM;
		memcpy(r, rules, n * sizeof(*r));
		qsort(r, n, sizeof(*r), cmp_rule);
	}
	for (size_t i = 0; i < n; i++) {
		if (r[i].qpn_lo > r[i].qpn_hi || r[i].qpn_hi > 0xFFFFFF ||
		    (i && r[i].qpn_lo <= r[i - 1].qpn_hi)) {
			free(r);
			return -EINVAL;
		}
	}

	const size_t dflt = need - 1;
	size_t pc = 0;
#define EMIT(insn) (prog[pc] = (struct sock_filter)insn, pc++)
#define GOTO_DEFAULT() EMIT(BPF_STMT(BPF_JMP | BPF_JA, (uint32_t)(dflt - (pc + 1))))
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, BTH_LEN, 1, 0));
	GOTO_DEFAULT();
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, BTH_DQPN_WORD));
	EMIT(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xFFFFFF));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MCAST_QPN, 0, 1));
	GOTO_DEFAULT();
	for (size_t i = 0; i < n; i++) {
		EMIT(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, r[i].qpn_lo, 1, 0));
		GOTO_DEFAULT();
		EMIT(BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, r[i].qpn_hi, 1, 0));
		EMIT(BPF_STMT(BPF_RET | BPF_K, r[i].index));
	}
	EMIT(BPF_STMT(BPF_RET | BPF_K, default_index));
#undef GOTO_DEFAULT
#undef EMIT
	free(r);
	return (int)pc;
}

int uroce_steer_attach(int fd, const struct uroce_steer_rule *rules, size_t n,
		       uint16_t default_index)
{
	size_t cap = 8 + 4 * n;
	struct sock_filter *prog = calloc(cap, sizeof(*prog));
	if (!prog)
		return -ENOMEM;
	int len = uroce_steer_build(rules, n, default_index, prog, cap);
	if (len < 0) {
		free(prog);
		return len;
	}
	struct sock_fprog fp = { .len = (unsigned short)len, .filter = prog };
	int rc = setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof(fp));
	free(prog);
	return rc ? -errno : 0;
}

/* A minimal interpreter for exactly the instructions uroce_steer_build emits. */
uint32_t uroce_steer_eval(const struct sock_filter *prog, size_t len, const uint8_t *p,
			  size_t plen)
{
	uint32_t a = 0;
	for (size_t pc = 0; pc < len; pc++) {
		const struct sock_filter *f = &prog[pc];
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_LEN:
			a = (uint32_t)plen;
			break;
		case BPF_LD | BPF_W | BPF_ABS:
			if (f->k > plen || plen - f->k < 4)
				return 0; /* the kernel aborts the program: result 0 */
			a = (uint32_t)p[f->k] << 24 | (uint32_t)p[f->k + 1] << 16 |
			    (uint32_t)p[f->k + 2] << 8 | p[f->k + 3];
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= f->k;
			break;
		case BPF_JMP | BPF_JA:
			pc += f->k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += a == f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += a >= f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			pc += a > f->k ? f->jt : f->jf;
			break;
		case BPF_RET | BPF_K:
			return f->k;
		default:
			return 0;
		}
	}
	return 0;
}
