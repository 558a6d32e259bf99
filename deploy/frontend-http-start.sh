#!/bin/sh
# Start the compose stack's HTTP frontend (`--profile http`) with
# authentication on: it listens on all addresses of its container, so it
# never serves without it.
#
#   CODE_MODE_OAUTH_ISSUER      set: accept OAuth 2.1 access tokens (JWTs) of this
#                               issuer instead of static tokens
#   CODE_MODE_OAUTH_RESOURCE    with ISSUER (required): this server's URI as clients
#                               reach it, the audience a token must carry
#   CODE_MODE_OAUTH_SCOPES      with ISSUER: scopes every token must hold,
#                               space-separated
#   CODE_MODE_HTTP_TOKENS_FILE  without ISSUER: the static tokens file, lines of
#                               `code-mode token new NAME` (default
#                               /etc/code-mode/http.tokens, mounted read-only)
#
# Arguments are passed on to `code-mode frontend`.
set -eu
if [ -n "${CODE_MODE_OAUTH_ISSUER:-}" ]; then
  : "${CODE_MODE_OAUTH_RESOURCE:?set CODE_MODE_OAUTH_RESOURCE: the URI clients reach this server by, as tokens name it}"
  set -- "$@" --oauth-issuer "$CODE_MODE_OAUTH_ISSUER" --oauth-resource "$CODE_MODE_OAUTH_RESOURCE"
  for scope in ${CODE_MODE_OAUTH_SCOPES:-}; do
    set -- "$@" --oauth-scope "$scope"
  done
else
  set -- "$@" --auth-tokens "${CODE_MODE_HTTP_TOKENS_FILE:-/etc/code-mode/http.tokens}"
fi
exec code-mode frontend "$@"
