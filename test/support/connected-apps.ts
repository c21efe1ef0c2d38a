/**
 * Connected AI apps in tests: an OAuth client provider of the MCP SDK that keeps everything in
 * memory (as a real client would keep it on disk), and the steps a person takes on the consent
 * step, through the same JSON routes the consent page uses.
 */
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { withToken } from './test-stack.js';

export class MemoryOAuthProvider implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = '';
  authorizationUrl?: URL;
  constructor(
    readonly redirectUrl: string,
    readonly name = 'Test assistant',
  ) {}
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    return 'state-123';
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** Follows the authorization endpoint's redirect to the consent page and answers the consent request's id. */
export async function consentIdOf(authorizationUrl: URL): Promise<string> {
  const res = await fetch(authorizationUrl, { redirect: 'manual' });
  expect(res.status, await res.clone().text()).toBe(302);
  const location = new URL(res.headers.get('location')!);
  const id = /^\/oauth\/consent\/([0-9a-f-]{36})$/.exec(location.pathname)?.[1];
  expect(id, location.href).toBeDefined();
  return id!;
}

export interface McpConnection {
  client: Client;
  transport: StreamableHTTPClientTransport;
}

/** A fresh MCP client on the provider's stored credentials (connects, or throws as the SDK does). */
export async function connectMcp(url: URL, provider: MemoryOAuthProvider): Promise<McpConnection> {
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  const client = new Client({ name: 'sdk-test-client', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/**
 * The whole first connection as an app makes it: the SDK discovers, registers and sends the person
 * to the authorization endpoint; `approve` is the person's consent (answers the redirect_url); the
 * SDK exchanges the code; a second connect succeeds.
 */
export async function authorizeAndConnect(
  url: URL,
  provider: MemoryOAuthProvider,
  approve: (consentId: string) => Promise<string>,
): Promise<McpConnection> {
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  const first = new Client({ name: 'sdk-test-client', version: '1.0.0' });
  await expect(first.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.authorizationUrl).toBeDefined();
  const redirect = new URL(await approve(await consentIdOf(provider.authorizationUrl!)));
  const code = redirect.searchParams.get('code');
  expect(code, redirect.href).toBeTruthy();
  await transport.finishAuth(code!);
  return connectMcp(url, provider);
}

/**
 * An AI app connected in process, through `app.inject` (no listening server): the app registers
 * as `name`, opens a consent request at the authorization endpoint, and the holder of `token`
 * approves it into `workspaceId` with read access (the consent flow of decision 040). Answers the
 * consent request's id.
 */
export async function connectAppInProcess(
  app: FastifyInstance,
  options: { token: string; workspaceId: string; name: string },
): Promise<string> {
  const appRedirect = 'https://app.example/callback';
  const client = (
    await app.inject({
      method: 'POST',
      url: '/oauth/register',
      payload: { client_name: options.name, redirect_uris: [appRedirect] },
    })
  ).json();
  const { resource } = (await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/mcp' })).json();
  const authorize = await app.inject({
    method: 'GET',
    url: `/oauth/authorize?${new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: appRedirect,
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      resource,
    })}`,
  });
  const consentRequestId = String(authorize.headers.location).split('/').pop()!;
  const consented = await app.inject({
    method: 'POST',
    url: `/connected-apps/consent-requests/${consentRequestId}/approve/`,
    headers: withToken(options.token),
    payload: { workspace_id: options.workspaceId, access: 'read' },
  });
  expect(consented.statusCode, consented.body).toBe(200);
  return consentRequestId;
}
