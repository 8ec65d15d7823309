/* pcap_io.h — reading and writing capture files (libpcap), for the CLI and tests. */
#ifndef UROCE_NET_PCAP_IO_H
#define UROCE_NET_PCAP_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

/*
 * Called once per frame with its 1-based index in the file.  @linktype is the
 * file's DLT (1 = Ethernet, 101/12 = raw IP, 113 = Linux cooked, 276 = cooked v2).
 * A non-zero return stops the walk and is returned by uroce_pcap_foreach.
 */
typedef int (*uroce_pcap_cb)(void *arg, unsigned idx, const struct timeval *ts,
			     const uint8_t *frame, size_t len, int linktype);

/* Walk every frame of @path.  Returns 0, the callback's non-zero value, or -errno
 * (with a message in @err, size @errlen) when the file cannot be read. */
int uroce_pcap_foreach(const char *path, uroce_pcap_cb cb, void *arg, char *err, size_t errlen);

/* Parse a frame of any supported linktype down to IP/UDP (see frame.h). */
struct uroce_frame;
int uroce_pcap_frame(const uint8_t *frame, size_t len, int linktype, struct uroce_frame *out);

/* A capture being written (Ethernet linktype). */
struct uroce_pcap_writer;
struct uroce_pcap_writer *uroce_pcap_create(const char *path, char *err, size_t errlen);
int uroce_pcap_write(struct uroce_pcap_writer *w, const uint8_t *frame, size_t len);
void uroce_pcap_close(struct uroce_pcap_writer *w);

#endif
