// A real OAuth authorization server that takes token exchange (RFC 8693),
// for code-mode's token-exchange tests: npm `oidc-provider` on a loopback
// port, playing the authorization server of a remote MCP server that
// trusts another issuer's access tokens (the frontend's).
//
//     node oidc_exchange_issuer.mjs RESOURCE --subject-issuer URL --subject-audience AUD [--ttl SECONDS]
//
// Prints `issuer=http://127.0.0.1:PORT` on stdout once it listens.
//
// - One confidential client, `code-mode-gw` / `gw-secret`
//   (client_secret_basic or _post), allowed client_credentials and the
//   token-exchange grant, scope `mcp:read`.
// - client_credentials: a JWT access token for RESOURCE (resource
//   indicators), whose `sub` is the client.
// - token exchange, registered with oidc-provider's registerGrantType
//   after the provider authenticated the client: the subject_token must be
//   an access token (subject_token_type) that is a JWT signed by
//   --subject-issuer's published keys, with that `iss` and `aud`
//   --subject-audience, unexpired; `resource` must be RESOURCE. The answer
//   is an RS256 JWT access token of this issuer (its own published key)
//   for the same `sub`, `aud` RESOURCE, living --ttl seconds (default 60),
//   with `act: {"sub": "code-mode-gw"}` (the client acts for the subject).
//   Anything else: invalid_grant / invalid_target / invalid_request.
//
// Test route: GET /test/counts answers {"token_exchange": n, "refused": n,
// "client_credentials": n}: the token requests served, by grant.

import http from 'node:http';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import Provider, { errors } from 'oidc-provider';
import { SignJWT, createRemoteJWKSet, jwtVerify } from 'jose';

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS = 'urn:ietf:params:oauth:token-type:access_token';

const args = process.argv.slice(2);
const resource = args[0];
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const subjectIssuer = option('--subject-issuer');
const subjectAudience = option('--subject-audience');
const ttl = Number(option('--ttl', '60'));
if (!resource || !subjectIssuer || !subjectAudience || !Number.isInteger(ttl)) {
  console.error('usage: node oidc_exchange_issuer.mjs RESOURCE --subject-issuer URL --subject-audience AUD [--ttl SECONDS]');
  process.exit(2);
}

const key = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...key.privateKey.export({ format: 'jwk' }), kid: 'exchange-key', use: 'sig', alg: 'RS256' };
const subjectKeys = createRemoteJWKSet(new URL(`${subjectIssuer}/jwks`));
const counts = { token_exchange: 0, refused: 0, client_credentials: 0 };

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'code-mode-gw',
        client_secret: 'gw-secret',
        grant_types: ['client_credentials', EXCHANGE],
        redirect_uris: [],
        response_types: [],
        scope: 'mcp:read',
      },
    ],
    jwks: { keys: [jwk] },
    scopes: ['mcp:read'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resource) throw new errors.InvalidTarget();
          return { scope: 'mcp:read', audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'jwt' };
        },
      },
    },
  });

  async function tokenExchange(ctx) {
    const params = ctx.oidc.params;
    counts.refused += 1;
    if (params.subject_token_type !== ACCESS) {
      throw new errors.InvalidRequest('subject_token_type must be an access token');
    }
    if (params.resource !== resource) {
      throw new errors.InvalidTarget('resource must be this server');
    }
    let subject;
    try {
      ({ payload: subject } = await jwtVerify(params.subject_token ?? '', subjectKeys, {
        issuer: subjectIssuer,
        audience: subjectAudience,
      }));
    } catch (e) {
      throw new errors.InvalidGrant(`the subject_token is not accepted (${e.code ?? 'invalid'})`);
    }
    counts.refused -= 1;
    counts.token_exchange += 1;
    const client = ctx.oidc.client.clientId;
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ scope: 'mcp:read', client_id: client, act: { sub: client } })
      .setProtectedHeader({ alg: 'RS256', kid: 'exchange-key', typ: 'at+jwt' })
      .setIssuer(issuer)
      .setSubject(subject.sub)
      .setAudience(resource)
      .setIssuedAt(now)
      .setExpirationTime(now + ttl)
      .setJti(randomUUID())
      .sign(key.privateKey);
    ctx.body = { access_token: token, issued_token_type: ACCESS, token_type: 'Bearer', expires_in: ttl, scope: 'mcp:read' };
  }
  provider.registerGrantType(EXCHANGE, tokenExchange, [
    'subject_token',
    'subject_token_type',
    'requested_token_type',
    'actor_token',
    'actor_token_type',
    'resource',
    'audience',
    'scope',
  ]);
  provider.on('grant.success', (ctx) => {
    if (ctx.oidc.params.grant_type === 'client_credentials') counts.client_credentials += 1;
  });

  const serve = provider.callback();
  server.on('request', (req, res) => {
    if (req.method === 'GET' && req.url === '/test/counts') {
      const body = JSON.stringify(counts);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
      return;
    }
    serve(req, res);
  });
  console.log(`issuer=${issuer}`);
});
