#!/usr/bin/env bash
# Run a command in a network namespace of its own that has nothing but the loopback interface.
#
#   scripts/isolated.sh COMMAND [ARG...]
#
# `make test` runs pytest this way: the simulated cluster's pods get addresses outside 127.0.0.0/8 (the API server
# refuses loopback addresses in Endpoints and EndpointSlices), and in this namespace no such address has a route, so
# nothing a test starts can send a packet off this machine, whatever it dials. Needs root (CI and the sessions run as
# root) or unprivileged user namespaces. Inside, VLLM_PULUMI_ISOLATED=1 is set; nested calls run the command as is.
set -euo pipefail

if [ "${VLLM_PULUMI_ISOLATED:-}" = 1 ]; then
    exec "$@"
fi

# Bring `lo` up without depending on iproute2: SIOCGIFFLAGS / SIOCSIFFLAGS with IFF_UP.
inner='python3 - <<"PY"
import fcntl, socket, struct
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
request = struct.pack("16sH", b"lo", 0)
flags = struct.unpack("16sH", fcntl.ioctl(sock, 0x8913, request))[1]
fcntl.ioctl(sock, 0x8914, struct.pack("16sH", b"lo", flags | 0x1))
PY
export VLLM_PULUMI_ISOLATED=1
exec "$@"'

if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
    exec unshare --net -- bash -c "$inner" isolated "$@"
fi
if unshare --user --map-root-user --net true 2>/dev/null; then
    exec unshare --user --map-root-user --net -- bash -c "$inner" isolated "$@"
fi
echo "scripts/isolated.sh: cannot create a network namespace (unshare --net needs root or user namespaces);" \
     "the end-to-end tests start servers and must not be able to reach other machines" >&2
exit 1
