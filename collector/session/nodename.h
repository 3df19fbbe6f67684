/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's host name, for log headers and the names of the injected
 * library's logs. The collector runs in a pod of its own (hostPID, not
 * hostNetwork), whose UTS namespace names the pod, not the node.
 */
#ifndef LLMT_NODENAME_H
#define LLMT_NODENAME_H

#include <stddef.h>

/* In order: $LLMT_NODE_NAME (kubectl-prof sets it to the pod's spec.nodeName);
 * in a UTS namespace of our own, the /etc/hostname of the nearest ancestor
 * process outside it (the container runtime's shim, in the node's root; read
 * inside that root, bounded); else gethostname(). Never empty ("unknown"). */
void lt_node_name(char *buf, size_t sz);

#endif
