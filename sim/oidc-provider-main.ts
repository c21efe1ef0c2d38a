/**
 * `npm run oidc:local`: the local OpenID Connect twin (sim/oidc-provider.ts) for the README
 * walk-through. It prints the settings to give the service and keeps running; users come from
 * OIDC_USERS_FILE (a JSON object of OidcUser by user id) and from `npm run oidc:token` at run time.
 *
 *   OIDC_PORT        the port to listen on (9400)
 *   OIDC_AUDIENCE    the audience of its access tokens, the service's AUTH_JWT_AUDIENCE (http://127.0.0.1:3000)
 *   OIDC_USERS_FILE  users to start with (none)
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { oidcUserSchema, startOidcProvider, type OidcUser } from './oidc-provider.js';

function loadUsers(file: string | undefined): Record<string, OidcUser> {
  if (!file) return {};
  return z.record(z.string(), oidcUserSchema).parse(JSON.parse(readFileSync(file, 'utf8')));
}

async function main(): Promise<void> {
  const port = Number(process.env.OIDC_PORT || 9400);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error('OIDC_PORT must be a port number.');
  const audience = process.env.OIDC_AUDIENCE || 'http://127.0.0.1:3000';
  const users = loadUsers(process.env.OIDC_USERS_FILE);
  const twin = await startOidcProvider({ port, audience, users });
  process.stdout.write(
    [
      `OIDC twin at ${twin.issuer} with ${Object.keys(users).length} user(s). Give the service:`,
      '',
      `AUTH_JWKS_URL=${twin.jwksUrl}`,
      `AUTH_JWT_ISSUER=${twin.issuer}`,
      `AUTH_JWT_AUDIENCE=${twin.audience}`,
      '',
      `A token: npm run oidc:token -- --issuer ${twin.issuer} --sub alice --email alice@example.com --org org_1 --org-role admin`,
      '',
    ].join('\n'),
  );
  const stop = () => void twin.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
