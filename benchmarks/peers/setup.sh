#!/usr/bin/env bash
# Create one virtualenv per peer under /tmp/peers-<name>, installed from PyPI. The peers are never
# dependencies of brutus: each runs in its own environment, driven by benchmarks/peers/<name>.py.
#
#   bash benchmarks/peers/setup.sh [NAME...]      # default: every peer; a ready venv is kept
#   PEERS_ROOT=/somewhere bash benchmarks/peers/setup.sh
set -euo pipefail

ROOT="${PEERS_ROOT:-/tmp}"
PYTHON="${PEERS_PYTHON:-python3}"

declare -A PACKAGES=(
  [openai-agents]="openai-agents sqlalchemy[asyncio] aiosqlite"
  [langchain]="langchain-community langchain-core sqlalchemy[asyncio]"
  [llm]="llm sqlite-utils"
  [adk]="google-adk sqlalchemy[asyncio] aiosqlite"
)

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(openai-agents langchain llm adk)
fi

for name in "${names[@]}"; do
  packages="${PACKAGES[$name]:-}"
  if [ -z "$packages" ]; then
    echo "setup.sh: unknown peer '$name' (known: ${!PACKAGES[*]})" >&2
    exit 2
  fi
  venv="$ROOT/peers-$name"
  # .ready holds the package list the venv was made for: a changed list reinstalls, an equal one is kept.
  if [ -x "$venv/bin/python" ] && [ "$(head -n 1 "$venv/.ready" 2>/dev/null)" = "$packages" ]; then
    echo "peer $name: $venv (ready)"
    continue
  fi
  echo "peer $name: installing $packages into $venv"
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
  # shellcheck disable=SC2086
  if ! "$venv/bin/pip" install --quiet $packages > "$venv/pip.log" 2>&1; then
    grep -v "is ignored: it is neither" "$venv/pip.log" >&2 || true
    echo "setup.sh: installing peer $name failed" >&2
    exit 1
  fi
  { echo "$packages"; "$venv/bin/pip" freeze; } > "$venv/.ready.tmp"
  mv "$venv/.ready.tmp" "$venv/.ready"
done
