#!/bin/sh
# Install the Debian packages listed in scripts/packages.txt and
# scripts/packages-test.txt that are missing.
# Safe to run repeatedly: it does nothing when everything is present.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
missing=""
for p in $(sed -e 's/#.*//' "$here/packages.txt" "$here/packages-test.txt"); do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing packages:$missing; run as root or install them with apt-get" >&2
	exit 1
fi
echo "install-deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
