// A real OAuth authorization server for the tests: npm `oidc-provider`
// (OpenID Certified) on a free loopback port, with one client_credentials
// client and resource indicators, so it issues JWT access tokens (RS256)
// whose `aud` is the resource the test names.
//
//     node oidc_issuer.mjs RESOURCE [PORT]
//
// Listens on PORT (a free port when not given: a test that starts the
// resource server before its issuer names the port it reserved), and
// prints `issuer=http://127.0.0.1:PORT` on stdout once it listens. The
// client is `code-mode-test` / `test-secret` (client_secret_basic or
// _post), allowed the scope `mcp:run`.
//
// For the refusal tests it also signs tokens the provider would never
// issue: `POST /test/mint` with {"claims": {...}, "sign": HOW} answers the
// token as text, HOW being `issuer-key` (RS256 with the issuer's own key,
// kid `test-key`), `other-key` (RS256 with a key the issuer does not
// publish, same kid), `hmac-public` (HS256 keyed with the issuer's public
// key PEM, kid `test-key`), `none` (alg none, no signature) or
// `unknown-kid:KID` (RS256 with the unpublished key, under a kid KID the
// issuer never had). `GET /test/jwks-fetches` answers how many times the
// issuer's key set (`/jwks`) was read, so a test can count the refetches.

import http from 'node:http';
import { createHmac, createSign, generateKeyPairSync } from 'node:crypto';
import Provider, { errors } from 'oidc-provider';

const resource = process.argv[2];
const port = Number(process.argv[3] ?? 0);
if (!resource || !Number.isInteger(port)) {
  console.error('usage: node oidc_issuer.mjs RESOURCE [PORT]');
  process.exit(2);
}

const issuerKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
const otherKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...issuerKey.privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' };

const b64 = (value) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

function mint(claims, how) {
  let kid = 'test-key';
  if (how.startsWith('unknown-kid:')) {
    kid = how.slice('unknown-kid:'.length);
    how = 'other-key';
  }
  const alg = { 'issuer-key': 'RS256', 'other-key': 'RS256', 'hmac-public': 'HS256', none: 'none' }[how];
  if (!alg) throw new Error(`unknown signing ${how}`);
  const header = alg === 'none' ? { alg, typ: 'at+jwt' } : { alg, typ: 'at+jwt', kid };
  const signed = `${b64(header)}.${b64(claims)}`;
  let signature = '';
  if (how === 'issuer-key' || how === 'other-key') {
    const key = how === 'issuer-key' ? issuerKey.privateKey : otherKey.privateKey;
    signature = createSign('RSA-SHA256').update(signed).sign(key).toString('base64url');
  } else if (how === 'hmac-public') {
    const secret = issuerKey.publicKey.export({ format: 'pem', type: 'spki' });
    signature = createHmac('sha256', secret).update(signed).digest('base64url');
  }
  return `${signed}.${signature}`;
}

let jwksFetches = 0;

const server = http.createServer();
server.listen(port, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'code-mode-test',
        client_secret: 'test-secret',
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        scope: 'mcp:run',
      },
    ],
    jwks: { keys: [jwk] },
    scopes: ['mcp:run'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
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
  const serve = provider.callback();
  server.on('request', (req, res) => {
    if (req.method === 'GET' && req.url === '/test/jwks-fetches') {
      const count = String(jwksFetches);
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': count.length }).end(count);
      return;
    }
    if (req.url.split('?')[0] === '/jwks') jwksFetches += 1;
    if (req.method === 'POST' && req.url === '/test/mint') {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        try {
          const { claims, sign } = JSON.parse(body);
          const token = mint(claims, sign);
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(token) }).end(token);
        } catch (e) {
          res.writeHead(400).end(String(e));
        }
      });
      return;
    }
    serve(req, res);
  });
  console.log(`issuer=${issuer}`);
});
