/* fuzz_seeds — write the UDP payload of every RoCEv2 packet in DATA_DIR/ *.pcap
 * as one file each into SEED_DIR (the fuzzer's read-only seed corpus), and
 * create CORPUS_DIR (the fuzzer's writable corpus) empty if missing.
 *   fuzz_seeds DATA_DIR SEED_DIR CORPUS_DIR
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "net/frame.h"
#include "net/pcap_io.h"

struct seeds {
	const char *dir, *file;
	unsigned n;
};

static int on_frame(void *arg, unsigned idx, const struct timeval *ts, const uint8_t *frame, size_t len,
		    int linktype)
{
	struct seeds *s = arg;
	struct uroce_frame f;
	char path[4096];
	FILE *out;

	if (uroce_pcap_frame(frame, len, linktype, &f) != 0 || f.dport != UROCE_UDP_PORT)
		return 0;
	snprintf(path, sizeof(path), "%s/%s-%04u", s->dir, s->file, idx);
	out = fopen(path, "wb");
	if (!out || fwrite(f.payload, 1, f.payload_len, out) != f.payload_len) {
		perror(path);
		if (out)
			fclose(out);
		return -EIO;
	}
	fclose(out);
	s->n++;
	return 0;
}

int main(int argc, char **argv)
{
	struct seeds s = { 0 };
	struct dirent *de;
	DIR *d;

	if (argc != 4) {
		fprintf(stderr, "usage: fuzz_seeds DATA_DIR SEED_DIR CORPUS_DIR\n");
		return 2;
	}
	if ((mkdir(argv[2], 0755) && errno != EEXIST) || (mkdir(argv[3], 0755) && errno != EEXIST)) {
		perror("mkdir");
		return 1;
	}
	d = opendir(argv[1]);
	if (!d) {
		perror(argv[1]);
		return 1;
	}
	s.dir = argv[2];
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		char path[4096], err[256];

		if (n < 5 || strcmp(de->d_name + n - 5, ".pcap"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", argv[1], de->d_name);
		s.file = de->d_name;
		if (uroce_pcap_foreach(path, on_frame, &s, err, sizeof(err))) {
			fprintf(stderr, "fuzz_seeds: %s: %s\n", path, err);
			closedir(d);
			return 1;
		}
	}
	closedir(d);
	printf("fuzz_seeds: %u seeds in %s\n", s.n, argv[2]);
	return s.n ? 0 : 1;
}
