// SPDX-License-Identifier: Apache-2.0
#include "collector/session/clock.h"
#include "inject_ctl.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* A target answering anything but what we wait for, this often, is not
 * going to answer. */
#define ICTL_MAX_OTHER 4096
#define ICTL_FIELD_MAX (1ULL << 48)

int lt_ictl_send(int sock, const char *msg, const int *fds, int nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * LT_ICTL_MAX_FDS)];
	struct iovec iov = { (void *)msg, strlen(msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds < 0 || nfds > LT_ICTL_MAX_FDS)
		return -EINVAL;
	memset(cbuf, 0, sizeof(cbuf));
	if (nfds > 0) {
		struct cmsghdr *cm;

		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	/* A target that stopped reading must not hold us. */
	n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	return n < 0 ? -errno : 0;
}


/* The target's bytes go into our log lines: nothing but printable ASCII. */
static void ictl_clean(char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			s[i] = '?';
}

int lt_ictl_recv(int sock, char *buf, size_t len, int ms)
{
	struct pollfd p = { sock, POLLIN, 0 };
	long long end = (long long)lt_mono_ms() + (ms > 0 ? ms : 0);
	ssize_t n;
	int r;

	if (len < 2)
		return -EINVAL;
	for (;;) {
		long long left = end - (long long)lt_mono_ms();
		r = poll(&p, 1, left > 0 ? (int)left : 0);
		if (r >= 0 || errno != EINTR)
			break;
	}
	if (r == 0)
		return -ETIMEDOUT;
	/* SOCK_SEQPACKET: a longer message is cut here, the rest discarded. */
	n = recv(sock, buf, len - 1, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -ETIMEDOUT;
	if (n <= 0)
		return 0;
	ictl_clean(buf, (size_t)n);
	buf[n] = 0;
	return (int)n;
}

int lt_ictl_await(int sock, const char *verb, char *buf, size_t len, int ms)
{
	long long end = (long long)lt_mono_ms() + ms;
	size_t vl = strlen(verb);

	for (int i = 0; i < ICTL_MAX_OTHER; i++) {
		long long left = end - (long long)lt_mono_ms();
		int rc = lt_ictl_recv(sock, buf, len, left > 0 ? (int)left : 0);
		if (rc <= 0 || !strncmp(buf, verb, vl))
			return rc;
	}
	return -ETIMEDOUT;
}

unsigned long long lt_ictl_field(const char *msg, const char *key)
{
	char k[32];
	const char *p;
	unsigned long long v = 0;

	snprintf(k, sizeof(k), " %s=", key);
	p = strstr(msg, k);
	if (!p)
		return 0;
	for (p += strlen(k); *p >= '0' && *p <= '9'; p++)
		if ((v = v * 10 + (unsigned)(*p - '0')) >= ICTL_FIELD_MAX)
			return ICTL_FIELD_MAX;
	return v;
}

const char *lt_ictl_text(const char *m)
{
	m += strcspn(m, " ");
	m += strspn(m, " ");
	if (!strncmp(m, "pid=", 4)) {
		m += strcspn(m, " ");
		m += strspn(m, " ");
	}
	return m;
}
