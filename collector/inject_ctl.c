// SPDX-License-Identifier: Apache-2.0
#include "inject_ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int lt_ictl_send(int sock, const char *msg, const char *dir)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	struct iovec iov = { (void *)msg, strlen(msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	memset(cbuf, 0, sizeof(cbuf));
	if (dfd >= 0) {
		struct cmsghdr *cm;

		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &dfd, sizeof(int));
	}
	n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	if (dfd >= 0)
		close(dfd);
	return n < 0 ? -errno : 0;
}

int lt_ictl_recv(int sock, char *buf, size_t len, int ms)
{
	struct pollfd p = { sock, POLLIN, 0 };
	ssize_t n;
	int r;

	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return -ETIMEDOUT;
	n = recv(sock, buf, len - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return (int)n;
}

unsigned long long lt_ictl_field(const char *msg, const char *key)
{
	char k[32];
	const char *p;

	snprintf(k, sizeof(k), " %s=", key);
	p = strstr(msg, k);
	return p ? strtoull(p + strlen(k), NULL, 10) : 0;
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
