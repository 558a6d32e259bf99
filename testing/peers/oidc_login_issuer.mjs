// A real OAuth authorization server for the web console's sign-in tests:
// npm `oidc-provider` (OpenID Certified) on a free loopback port, with the
// authorization-code flow, its development login and consent pages
// (`devInteractions`: any login name, any password; the name is the `sub`)
// and resource indicators, so the access tokens are RS256 JWTs whose `aud`
// is the resource the test names.
//
//     node oidc_login_issuer.mjs RESOURCE REDIRECT_URI
//
// Prints `issuer=http://127.0.0.1:PORT` on stdout once it listens. Two
// clients may use REDIRECT_URI, both allowed the scopes `openid mcp:run`:
// `code-mode-console` (confidential, secret `console-secret`,
// client_secret_basic or _post) and `code-mode-console-public` (public:
// PKCE alone). Access tokens carry `groups`: `["security", "operators"]`
// for the login `alice`, none for anyone else.

import http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import Provider, { errors } from 'oidc-provider';

const [resource, redirectUri] = process.argv.slice(2);
if (!resource || !redirectUri) {
  console.error('usage: node oidc_login_issuer.mjs RESOURCE REDIRECT_URI');
  process.exit(2);
}

const key = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...key.privateKey.export({ format: 'jwk' }), kid: 'login-key', use: 'sig', alg: 'RS256' };
const groups = { alice: ['security', 'operators'] };

const client = {
  grant_types: ['authorization_code'],
  response_types: ['code'],
  redirect_uris: [redirectUri],
  scope: 'openid mcp:run',
};

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [
      { ...client, client_id: 'code-mode-console', client_secret: 'console-secret' },
      { ...client, client_id: 'code-mode-console-public', token_endpoint_auth_method: 'none' },
    ],
    jwks: { keys: [jwk] },
    scopes: ['openid', 'mcp:run'],
    extraTokenClaims: (_ctx, token) => (token.kind === 'AccessToken' ? { groups: groups[token.accountId] ?? [] } : {}),
    features: {
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resource) throw new errors.InvalidTarget();
          return { scope: 'mcp:run', audience: resource, accessTokenTTL: 300, accessTokenFormat: 'jwt' };
        },
      },
    },
  });
  server.on('request', provider.callback());
  console.log(`issuer=${issuer}`);
});
