/**
 * `npm run oidc:token -- --issuer URL --sub ID --email ADDRESS [--name NAME] [--org ORG_ID]
 * [--org-name NAME] [--org-role ROLE]... [--unverified] [--scope SCOPE]`: registers (or updates)
 * the user at a running local OIDC twin (`npm run oidc:local`) through its dev endpoint, then signs
 * them in through the authorization-code flow and prints the access token.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { UsageError } from './cli.js';
import { codeFlowAccessToken } from './oidc-client.js';
import type { OidcUser } from './oidc-provider.js';

const usage =
  'Usage: npm run oidc:token -- --issuer URL --sub ID --email ADDRESS [--name NAME] [--org ORG_ID] ' +
  '[--org-name NAME] [--org-role ROLE]... [--unverified] [--scope SCOPE]';

/** Registers the user the arguments describe at the twin and answers an access token for them. */
export async function oidcToken(args: string[]): Promise<string> {
  const { values } = parseArgs({
    args,
    options: {
      issuer: { type: 'string' },
      sub: { type: 'string' },
      email: { type: 'string' },
      name: { type: 'string' },
      org: { type: 'string' },
      'org-name': { type: 'string' },
      'org-role': { type: 'string', multiple: true },
      unverified: { type: 'boolean', default: false },
      scope: { type: 'string' },
    },
  });
  if (!values.issuer || !values.sub || !values.email) throw new UsageError('--issuer, --sub and --email are required.');
  const roles = values['org-role'] ?? [];
  const user: OidcUser = {
    email: values.email,
    email_verified: !values.unverified,
    name: values.name,
    org_id: values.org ?? null,
    org_name: values['org-name'],
    org_role: roles.length > 1 ? roles : roles[0],
  };
  const issuer = values.issuer.replace(/\/$/, '');
  const { resource } = await registerUser(issuer, values.sub, user);
  return codeFlowAccessToken({ issuer, sub: values.sub, resource, scope: values.scope });
}

/** PUT /dev/users/:sub, the twin's own endpoint; it answers the resource its tokens are for. */
async function registerUser(issuer: string, sub: string, user: OidcUser): Promise<{ resource: string }> {
  const response = await fetch(`${issuer}/dev/users/${encodeURIComponent(sub)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(user),
  });
  if (!response.ok) throw new Error(`The twin refused the user (${response.status}): ${await response.text()}`);
  return (await response.json()) as { resource: string };
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  oidcToken(process.argv.slice(2)).then(
    (token) => process.stdout.write(`${token}\n`),
    (error: unknown) => {
      const usageError = error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
      process.stderr.write(
        `${error instanceof Error ? error.message : String(error)}\n${usageError ? `\n${usage}\n` : ''}`,
      );
      process.exit(usageError ? 2 : 1);
    },
  );
}
