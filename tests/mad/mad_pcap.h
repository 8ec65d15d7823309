/* mad_pcap.h — find the MADs (UD SEND to QP1) in a capture, for the mad tests. */
#ifndef UROCE_TESTS_MAD_PCAP_H
#define UROCE_TESTS_MAD_PCAP_H

#include <stddef.h>
#include <stdint.h>

/* Called with the 1-based frame number and the MAD bytes (normally 256). */
typedef int (*mad_pcap_cb)(void *arg, unsigned frame, const uint8_t *mad, size_t len);

/* Walk @path; returns the number of MADs found (>= 0), the callback's non-zero value,
 * or -errno (message on stderr). */
int mad_pcap_foreach(const char *path, mad_pcap_cb cb, void *arg);

#endif
