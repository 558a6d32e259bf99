// A real OAuth authorization server for code-mode's upstream login tests:
// npm `oidc-provider` (OpenID Certified) on a loopback port, playing the
// authorization server of a remote MCP server that code-mode logs in to.
//
//     node oidc_upstream_issuer.mjs RESOURCE [--ttl SECONDS] [--port PORT] [--pages] [--keep FILE]
//
// Prints `issuer=http://127.0.0.1:PORT` on stdout once it listens.
//
// - Dynamic Client Registration (RFC 7591) is open; PKCE (S256) is required
//   of public clients; the iss parameter (RFC 9207) is sent.
// - Resource indicators: access tokens are RS256 JWTs for RESOURCE, living
//   --ttl seconds (default 5), with the scopes `mcp:read` and `mcp:write`
//   as asked, and a refresh token to every client registered for that grant.
// - The person's step: by default every authorization is approved at once
//   for the account `alice` (the interaction routes log in and consent
//   without a page), so a test follows the redirects as a browser would;
//   with --pages the provider's own development login and consent pages
//   are shown (any name logs in: the name is the `sub`), for a real browser.
// - --keep FILE: the signing key and the clients registered are kept in
//   FILE (JSON), and read back when it exists, so the issuer started again
//   on the same --port after being killed knows them (a fault test's
//   authorization server back from an outage); grants and codes are not kept.
//
// Test routes:
//   POST /test/revoke   revoke every grant (refresh tokens stop working)
//   POST /test/slow?ms=N delay every token request by N ms (0: none)
//   GET  /test/counts   {"authorization_code": n, "refresh_token": n} token requests served
//   POST /test/account?name=NAME  the account the next approved logins log in as (default alice),
//                       so one test can connect two people's accounts

import http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import Provider, { errors } from 'oidc-provider';

const args = process.argv.slice(2);
const resource = args[0];
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const ttl = Number(option('--ttl', '5'));
const port = Number(option('--port', '0'));
const pages = args.includes('--pages');
const keep = option('--keep', '');
if (!resource || !Number.isInteger(ttl) || !Number.isInteger(port)) {
  console.error('usage: node oidc_upstream_issuer.mjs RESOURCE [--ttl SECONDS] [--port PORT] [--pages] [--keep FILE]');
  process.exit(2);
}

const kept = keep && existsSync(keep) ? JSON.parse(readFileSync(keep, 'utf8')) : { jwk: null, clients: [] };
if (!kept.jwk) {
  const key = generateKeyPairSync('rsa', { modulusLength: 2048 });
  kept.jwk = { ...key.privateKey.export({ format: 'jwk' }), kid: 'upstream-key', use: 'sig', alg: 'RS256' };
}
const jwk = kept.jwk;
const save = () => {
  if (keep) writeFileSync(keep, JSON.stringify(kept));
};
save();
const grants = new Set();
const counts = { authorization_code: 0, refresh_token: 0 };
let slowMs = 0;
let account = 'alice';

const server = http.createServer();
server.listen(port, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    jwks: { keys: [jwk] },
    clients: kept.clients,
    scopes: ['openid', 'offline_access', 'mcp:read', 'mcp:write'],
    findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
    // Every client allowed the grant gets a refresh token (the requests are
    // plain OAuth, without `openid`, so offline_access is not the signal).
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: pages },
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resource) throw new errors.InvalidTarget();
          return { scope: 'mcp:read mcp:write', audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'jwt' };
        },
      },
    },
  });
  provider.on('grant.success', (ctx) => {
    const type = ctx.oidc.params.grant_type;
    if (type in counts) counts[type] += 1;
  });
  provider.on('registration_create.success', (_ctx, client) => {
    kept.clients.push(client.metadata());
    save();
  });
  provider.on('authorization_code.saved', (code) => grants.add(code.grantId));

  // Approve an interaction at once: log the current test account in (`alice` unless /test/account said otherwise), consent to what is asked.
  async function approve(req, res) {
    const details = await provider.interactionDetails(req, res);
    const { prompt, params, session } = details;
    if (prompt.name === 'login') {
      await provider.interactionFinished(req, res, { login: { accountId: account } }, { mergeWithLastSubmission: false });
      return;
    }
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }

  const serve = provider.callback();
  server.on('request', async (req, res) => {
    const path = req.url.split('?')[0];
    try {
      if (!pages && req.method === 'GET' && path.startsWith('/interaction/')) {
        await approve(req, res);
        return;
      }
      if (req.method === 'POST' && path === '/test/revoke') {
        for (const id of grants) {
          await provider.RefreshToken.adapter.revokeByGrantId(id);
          const grant = await provider.Grant.find(id);
          if (grant) await grant.destroy();
        }
        grants.clear();
        res.writeHead(204).end();
        return;
      }
      if (req.method === 'POST' && path === '/test/account') {
        account = new URL(req.url, issuer).searchParams.get('name') ?? 'alice';
        res.writeHead(204).end();
        return;
      }
      if (req.method === 'POST' && path === '/test/slow') {
        slowMs = Number(new URL(req.url, issuer).searchParams.get('ms') ?? '0');
        res.writeHead(204).end();
        return;
      }
      if (req.method === 'GET' && path === '/test/counts') {
        const body = JSON.stringify(counts);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
        return;
      }
      if (slowMs > 0 && path === '/token') {
        await new Promise((resolve) => setTimeout(resolve, slowMs));
      }
      serve(req, res);
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  });
  console.log(`issuer=${issuer}`);
});
