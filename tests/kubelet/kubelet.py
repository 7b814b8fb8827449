#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A kubelet stand-in for the tests: the pod-resources gRPC service
(v1.PodResourcesLister/List) on a Unix socket, served by the real gRPC
stack (Debian's python3-grpcio) from the API's protobuf schema, compiled
by protoc when the test starts. It answers with the pods given as JSON.

Usage: kubelet.py SOCKET PODS.json GENERATED_DIR
PODS.json: [{"name", "namespace", "containers": [{"name", "devices":
[{"resource_name", "device_ids": [...], "numa": [0]}], "cpu_ids": [...]}]}]
"""
import json
import os
import sys
from concurrent import futures

import grpc


def main():
    sock, pods_file, gen = sys.argv[1:4]
    sys.path.insert(0, gen)
    import podresources_pb2 as pb  # noqa: E402 - generated at start

    def list_pods(request, context):
        reply = pb.ListPodResourcesResponse()
        for p in json.load(open(pods_file)):
            pod = reply.pod_resources.add(name=p["name"], namespace=p["namespace"])
            for c in p["containers"]:
                cont = pod.containers.add(name=c["name"])
                cont.cpu_ids.extend(c.get("cpu_ids", []))
                cont.memory.add(memory_type="memory", size=1 << 30).topology.nodes.add(ID=0)
                for d in c["devices"]:
                    dev = cont.devices.add(resource_name=d["resource_name"], device_ids=d["device_ids"])
                    for n in d.get("numa", []):
                        dev.topology.nodes.add(ID=n)
        return reply

    handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
        "List": grpc.unary_unary_rpc_method_handler(
            list_pods, request_deserializer=pb.ListPodResourcesRequest.FromString,
            response_serializer=pb.ListPodResourcesResponse.SerializeToString)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    if os.path.exists(sock):
        os.unlink(sock)
    server.add_insecure_port("unix:" + sock)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
