#!/usr/bin/env bash
# Builds the Hatchet engine binaries (hatchet-migrate, hatchet-admin, hatchet-engine, hatchet-api)
# that OwlClaw's timer tests and the Hatchet backend run locally. The engine and the API run as two
# processes rather than hatchet-lite: lite exits on SIGINT/SIGTERM before its engine has removed
# its scheduler partition and ticker, so a restart on the same database fired late until Hatchet's
# one-minute rebalance; hatchet-engine waits for that cleanup before it exits.
#
# The hatchet-embedded sidecar module is not served by the Go module proxy reachable here (403 for
# every version), so the engine is built from the github.com/hatchet-dev/hatchet module at the
# pinned version, inside a copy of that module so its own go.sum pins every dependency.
set -euo pipefail

VERSION="v0.104.7"   # keep in step with owlclaw/timers/hatchet_engine.py HATCHET_VERSION
OUT="$(realpath -m "${1:-.owlclaw/bin}")"
BINARIES=(hatchet-migrate hatchet-admin hatchet-engine hatchet-api)
STAMP="$VERSION ${BINARIES[*]}"   # a build of other binaries (hatchet-lite) is rebuilt

if [[ -f "$OUT/.hatchet-version" && "$(cat "$OUT/.hatchet-version")" == "$STAMP" ]]; then
  echo "Hatchet $VERSION already built in $OUT"
  exit 0
fi

command -v go >/dev/null || { echo "go is required to build the Hatchet engine" >&2; exit 1; }
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/hatchet-dev/hatchet@$VERSION" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
cp -r "$src" "$work/hatchet" && chmod -R u+w "$work/hatchet"
mkdir -p "$OUT"
for binary in "${BINARIES[@]}"; do
  echo "building $binary $VERSION"
  (cd "$work/hatchet" && go build -trimpath -ldflags "-s -w -X main.Version=$VERSION" \
    -o "$OUT/$binary" "./cmd/$binary")
done
echo "$STAMP" > "$OUT/.hatchet-version"
echo "Hatchet $VERSION built in $OUT"
