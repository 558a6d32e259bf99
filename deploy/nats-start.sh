#!/bin/sh
# Start nats-server for the code-mode stack, alone or as one node of a
# cluster (the compose file's `nats` services run this; so do the tests).
#
#   CODE_MODE_NATS_CONF            the configuration (/etc/code-mode/nats-server.conf):
#                                  the service users, JetStream
#   CODE_MODE_NATS_STORE           JetStream's store (/var/lib/code-mode-nats)
#   CODE_MODE_NATS_ROUTES          empty: one server. Else the cluster's nodes,
#                                  host:port of each one's route listener,
#                                  comma-separated (this node's own included)
#   CODE_MODE_NATS_ROUTE_PASSWORD  with ROUTES: the password every route
#                                  presents and requires (user `route`)
#   CODE_MODE_NATS_NODE            with ROUTES: this node's unique name
#   CODE_MODE_NATS_CLUSTER_LISTEN  with ROUTES: where routes connect (0.0.0.0:6222)
#
# Arguments are passed on to nats-server (they win over the configuration).
set -eu
set -- -c "${CODE_MODE_NATS_CONF:-/etc/code-mode/nats-server.conf}" -js \
  -sd "${CODE_MODE_NATS_STORE:-/var/lib/code-mode-nats}" "$@"
if [ -n "${CODE_MODE_NATS_ROUTES:-}" ]; then
  : "${CODE_MODE_NATS_ROUTE_PASSWORD:?set CODE_MODE_NATS_ROUTE_PASSWORD: the routes between the nodes need it}"
  : "${CODE_MODE_NATS_NODE:?set CODE_MODE_NATS_NODE: each node of a cluster needs its own name}"
  auth="route:$CODE_MODE_NATS_ROUTE_PASSWORD"
  routes=""
  for route in $(echo "$CODE_MODE_NATS_ROUTES" | tr ',' ' '); do
    routes="$routes${routes:+,}nats://$auth@$route"
  done
  set -- "$@" -n "$CODE_MODE_NATS_NODE" --cluster_name codemode \
    --cluster "nats://$auth@${CODE_MODE_NATS_CLUSTER_LISTEN:-0.0.0.0:6222}" --routes "$routes"
fi
exec nats-server "$@"
