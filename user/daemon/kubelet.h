/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Which pod holds which card: the kubelet's pod-resources API (gRPC,
 * v1.PodResourcesLister/List, on a Unix socket), asked over HTTP/2 with
 * nghttp2, its protobuf answer read by hand. The daemon serves it as
 * spyre_device_allocation_info, so per-workload views are a join in
 * Prometheus and no metric carries a pod as a label of its own.
 */
#ifndef SBT_KUBELET_H
#define SBT_KUBELET_H

#include <stddef.h>
#include <stdint.h>

#define KUBELET_DEFAULT_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"

struct allocation {
	char device[64]; /* a PCI address (0000:3b:00.0), or the plugin's id as it is */
	char resource[128]; /* the device plugin's resource name: ibm.com/spyre */
	char pod[254], namespace[64], container[64];
};

struct allocations {
	struct allocation *v;
	size_t n, cap;
};

/* Asks the kubelet at sock for the devices of every container, keeping
 * those whose resource name matches the glob. 0, or -errno with err (the
 * list is then left as it was). Waits at most timeout_ms. */
int kubelet_list(const char *sock, const char *resource_glob, int timeout_ms, struct allocations *out, char *err,
		 size_t errlen);
/* The protobuf answer of List (ListPodResourcesResponse) into out. 0, or
 * -EBADMSG. For the tests and the fuzzer as well. */
int kubelet_parse(const uint8_t *msg, size_t len, const char *resource_glob, struct allocations *out);
void kubelet_free(struct allocations *a);

#endif
