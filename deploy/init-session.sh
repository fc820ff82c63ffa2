#!/bin/sh
# One-shot init step of docker-compose.yml: split the LP, make fresh session certificates, and
# give every participant a directory holding only what it may see:
#   /session/<party>/      ca.pem, <party>.pem, <party>.key (0600), <party>.npz
#   /session/coordinator/  ca.pem, coordinator.pem, coordinator.key (0600), public.npz
set -eu
LP_FILE="${LP_FILE:-/deploy/afiro.mps}"
PARTIES="${PARTIES:-owner1,owner2,owner3}"
work=$(mktemp -d)
securelp split "$LP_FILE" --ids "$PARTIES" --out "$work/blocks"
securelp certs --out "$work/certs" --ids "$PARTIES"
rm -rf /session/coordinator
for p in $(echo "$PARTIES" | tr ',' ' '); do
  rm -rf "/session/$p"; mkdir -p "/session/$p"
  cp "$work/certs/ca.pem" "$work/certs/$p.pem" "$work/certs/$p.key" "$work/blocks/$p.npz" "/session/$p/"
done
mkdir -p /session/coordinator
cp "$work/certs/ca.pem" "$work/certs/coordinator.pem" "$work/certs/coordinator.key" "$work/blocks/public.npz" \
   /session/coordinator/
chown -R 10001:10001 /session
chmod 700 /session/*
rm -rf "$work"   # the CA key was never written; nothing else is kept
echo "session ready: $PARTIES"
