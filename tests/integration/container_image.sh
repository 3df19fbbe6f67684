#!/bin/bash
# The project's own image (deploy/Dockerfile), built without a registry: its
# BASE is a Debian 12 image from mmdebstrap, its CUDA_DEVEL an image holding
# only this machine's CUDA headers; then the collector inside it, in a
# --privileged --pid=host container (a privileged profiling pod), profiles a
# python3.11 job in a container of its own with -t all.
# The build takes minutes (apt-get and make inside it): run with
# LLMT_TEST_IMAGE=1; the image is kept, keyed by the hash of the commit's
# tree, so a second run reuses it.
set -u
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/container.inc"
[ "${LLMT_TEST_IMAGE:-0}" = 1 ] ||
	skip "builds deploy/Dockerfile (minutes): run with LLMT_TEST_IMAGE=1"
need_bpf
need_podman
CUDA_INC=${CUDA_HOME:-/usr/local/cuda}/include
[ -r "$CUDA_INC/cupti.h" ] || skip "no CUDA headers at $CUDA_INC"
ct_image py311 python3.11 dash strace || skip "cannot build the test image"
JOB_IMAGE=$CT_IMAGE
ct_image debian12 --variant=minbase ca-certificates || skip "cannot build the base image"
BASE_IMAGE=$CT_IMAGE

# CUDA_DEVEL: /usr/local/cuda/include only
tree=$(git rev-parse HEAD^{tree} 2> /dev/null || echo dirty)
cuda_img=localhost/llmtracker-test-cuda-headers:$(tar -C "$CUDA_INC" -cf - . | sha256sum | cut -c1-16)
if ! podman image exists "$cuda_img"; then
	mkdir -p "$T/cuda/usr/local/cuda"
	cp -r "$CUDA_INC" "$T/cuda/usr/local/cuda/include"
	tar -C "$T/cuda" -cf "$T/cuda.tar" . && podman import -q "$T/cuda.tar" "$cuda_img" > /dev/null
fi
img=localhost/llmtracker-test-image:${tree:0:16}
if ! podman image exists "$img" || [ "$tree" = dirty ]; then
	echo "# building $img from deploy/Dockerfile (BASE=$BASE_IMAGE)"
	s=$(date +%s)
	# apt-get inside the build needs the network; nothing else does
	# (no layer images left behind: each is the size of the build stage)
	podman build -q --layers=false --network=host -f deploy/Dockerfile --build-arg BASE="$BASE_IMAGE" \
		--build-arg CUDA_DEVEL="$cuda_img" -t "$img" . > "$T/build.log" 2>&1
	rc=$?
	# one such image at a time: the other trees' go
	[ $rc = 0 ] && podman images --format '{{.Repository}}:{{.Tag}}' localhost/llmtracker-test-image |
		grep -vx "$img" | xargs -r podman rmi > /dev/null 2>&1
	echo "# built in $(( $(date +%s) - s )) s (rc $rc)"
	[ $rc = 0 ] || tail -20 "$T/build.log" | sed 's/^/# build: /'
	check "deploy/Dockerfile builds from BASE=$BASE_IMAGE" [ $rc = 0 ]
	[ $rc = 0 ] || tap_done
fi

mkdir -p "$T/share" "$T/out"
ct_run -v "$T/share:/share" -v "$PWD/tests/workloads:/w:ro" "$JOB_IMAGE" python3.11 -c "
import os, runpy, sys, time
while not os.path.exists('/share/go'): time.sleep(0.02)
sys.argv = ['py_calltree.py', '3000']
runpy.run_path('/w/py_calltree.py', run_name='__main__')" || { nok "job container starts"; tap_done; }
job=$(ct_pid)
ct_run --privileged --pid=host -v "$T/out:/data" "$img" \
	llmtracker profile -p "$job" -t all -v 1 -o /data/c.evlog || { nok "collector container starts"; tap_done; }
coll=$CT_ID
wait_until 60 'podman logs "$coll" 2>&1 | grep -q "tracing functions"'
touch "$T/share/go"
podman wait "$coll" > /dev/null 2>&1
rc=$(podman inspect -f '{{.State.ExitCode}}' "$coll")
podman logs "$coll" > "$T/coll.err" 2>&1
sed 's/^/# /' "$T/coll.err" | grep -v 'tracing functions' | tail -10
check "the image's collector, privileged with the node's pids: -t all on the job exits 0" [ "$rc" = 0 ]
"$DUMP" "$T/out/c.evlog" > "$T/dump" 2>&1
python3 tests/integration/python_check.py f=3000 g=9000 < "$T/dump" > "$T/check"
check "... Python calls f=3000 g=9000, as made" [ $? = 0 ]
check "... the log names the node ($(hostname))" grep -qx "# host=$(hostname)" "$T/dump"
tap_done
